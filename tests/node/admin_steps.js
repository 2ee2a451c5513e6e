// Runs kafkajs admin calls against a cluster, one JSON plan in, one JSON answer out:
//   node admin_steps.js <bootstrap> '<steps>'
// where steps is a list of {"op": "describeConfigs" | "alterConfigs" | "createTopics",
// "args": {...}} (the kafkajs admin method's argument). Each step's answer, or
// {"error": {"name", "type", "message"}}, is printed as one JSON list on stdout.
const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, stepsJson] = process.argv.slice(2)
  const steps = JSON.parse(stepsJson)
  const kafka = new Kafka({
    clientId: 'kafkajs-configs-test',
    brokers: bootstrap.split(','),
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const answers = []
  try {
    for (const step of steps) {
      try {
        answers.push(await admin[step.op](step.args))
      } catch (e) {
        answers.push({ error: { name: e.name, type: e.type || null, message: e.message } })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(answers))
}

main().catch(e => {
  process.stderr.write(String(e && e.stack ? e.stack : e))
  process.exit(1)
})
