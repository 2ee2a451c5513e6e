"""`tributary broker ...` and `tributary controller ...`: run a server in the foreground."""

from __future__ import annotations


def register(subparsers) -> None:
    from broker.__main__ import add_arguments as broker_arguments

    broker = subparsers.add_parser("broker", help="run a broker (foreground)")
    broker_arguments(broker)
    broker.set_defaults(handler=_run_broker)

    controller = subparsers.add_parser("controller", help="run a controller (foreground)")
    try:
        from controller.__main__ import add_arguments as controller_arguments
    except ImportError:  # the controller package is optional until it exists
        pass
    else:
        controller_arguments(controller)
    controller.set_defaults(handler=_run_controller)


def _run_broker(args) -> int:
    from broker.__main__ import run

    return run(args)


def _run_controller(args) -> int:
    from controller.__main__ import run

    return run(args)
