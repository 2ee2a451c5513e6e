// @platformatic/kafka against a Tributary cluster's Kafka listeners: an admin creates a
// topic, a producer writes keyed records with acks=all, `members` consumers in one group
// read every record back (none when `members` is 0), and the admin deletes the topic. Prints one JSON line with what
// each step gave, or {"failed": step, "error": message} at the first step that throws.
// Usage: node platformatic_roundtrip.mjs <bootstrap host:port,...> <topic> <count> <members>
import { Admin, Consumer, Producer, ProduceAcks, stringDeserializers, stringSerializers }
  from "@platformatic/kafka";

const [bootstrap, topic, countArg, membersArg] = process.argv.slice(2);
const count = Number(countArg);
const members = Number(membersArg);
const brokers = bootstrap.split(",");
const result = {};
let step = "start";

function describe(error) {
  const parts = [String(error && error.message)];
  for (const inner of (error && error.errors) || []) parts.push(describe(inner));
  if (error && error.cause) parts.push(describe(error.cause));
  return parts.join(" | ");
}

try {
  step = "createTopics";
  const admin = new Admin({ clientId: "tributary-platformatic-admin", bootstrapBrokers: brokers });
  const created = await admin.createTopics({ topics: [topic], partitions: 3, replicas: 3 });
  result.created = created.map((t) => ({ name: t.name, partitions: t.partitions }));

  step = "metadata";
  const metadata = await admin.metadata({ topics: [topic] });
  const info = metadata.topics.get(topic);
  result.partitions = info ? info.partitionsCount : null;

  step = "produce";
  const producer = new Producer({
    clientId: "tributary-platformatic-producer",
    bootstrapBrokers: brokers,
    serializers: stringSerializers,
  });
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ topic, key: `k-${i}`, value: `v-${i}` });
  await producer.send({ messages, acks: ProduceAcks.ALL });
  result.produced = count;
  await producer.close();

  step = "consume";
  if (members > 0) {
  const seen = new Map();
  const byMember = [];
  const consumers = [];
  await new Promise(async (resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${seen.size} of ${count} in 60 s`)), 60000);
    try {
      for (let m = 0; m < members; m++) {
        const consumer = new Consumer({
          groupId: `${topic}-group`,
          clientId: `tributary-platformatic-consumer-${m}`,
          bootstrapBrokers: brokers,
          deserializers: stringDeserializers,
        });
        consumers.push(consumer);
        byMember.push(new Set());
        const stream = await consumer.consume({
          topics: [topic], mode: "earliest", autocommit: true,
          sessionTimeout: 10000, heartbeatInterval: 500,
        });
        stream.on("data", (message) => {
          seen.set(message.key, message.value);
          byMember[m].add(message.partition);
          if (seen.size >= count) { clearTimeout(timer); resolve(); }
        });
        stream.on("error", reject);
      }
    } catch (error) { reject(error); }
  });
  result.consumed = seen.size;
  result.intact = [...seen].every(([k, v]) => k.slice(2) === v.slice(2));
  result.partitionsByMember = byMember.map((s) => [...s].sort());
  for (const consumer of consumers) await consumer.close(true);
  }

  step = "deleteTopics";
  await admin.deleteTopics({ topics: [topic] });
  // The broker asked answers once it dropped the topic; the others may take a moment more.
  for (let i = 0; i < 50 && (await admin.listTopics()).includes(topic); i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  result.deleted = !(await admin.listTopics()).includes(topic);
  await admin.close();
  console.log(JSON.stringify(result));
  process.exit(0);
} catch (error) {
  console.log(JSON.stringify({ ...result, failed: step, error: describe(error) }));
  process.exit(1);
}
