// kafkajs' transactional producer against a Tributary cluster's Kafka listeners: one
// transaction of `count` records committed, then one of `count` records aborted (sent,
// so they are in the log, before the abort). Prints one JSON line.
// Usage: node kafkajs_transactions.mjs <bootstrap host:port,...> <topic> <transactionalId> <count>
import kafkajs from "kafkajs";

const { Kafka, logLevel } = kafkajs;
const [bootstrap, topic, transactionalId, countArg] = process.argv.slice(2);
const count = Number(countArg);
const kafka = new Kafka({
  clientId: "tributary-kafkajs-txn-test",
  brokers: bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 10, initialRetryTime: 200 },
});

const messages = (prefix) => {
  const out = [];
  for (let i = 0; i < count; i++) out.push({ key: `${prefix}-${i}`, value: `${prefix}-${i}` });
  return out;
};

const result = {};
const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
await producer.connect();
try {
  const committed = await producer.transaction();
  result.committedAcks = (await committed.send({ topic, acks: -1, messages: messages("kjs-c") })).length;
  await committed.commit();
  result.committed = true;
  const aborted = await producer.transaction();
  result.abortedAcks = (await aborted.send({ topic, acks: -1, messages: messages("kjs-a") })).length;
  await aborted.abort();
  result.aborted = true;
} catch (error) {
  result.failed = `${error.name}: ${error.message}`;
} finally {
  await producer.disconnect();
}
console.log(JSON.stringify(result));
