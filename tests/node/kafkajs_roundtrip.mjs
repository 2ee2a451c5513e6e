// kafkajs against a Tributary cluster's Kafka listeners: an admin creates a topic and
// reads its metadata and configs, an idempotent gzip producer writes keyed records with
// acks=all, and a consumer group member reads them all back. Prints one JSON line.
// Usage: node kafkajs_roundtrip.mjs <bootstrap host:port,...> <topic> <count>
import kafkajs from "kafkajs";

const { Kafka, CompressionTypes, logLevel, ConfigResourceTypes } = kafkajs;
const [bootstrap, topic, countArg] = process.argv.slice(2);
const count = Number(countArg);
const kafka = new Kafka({
  clientId: "tributary-kafkajs-test",
  brokers: bootstrap.split(","),
  logLevel: logLevel.NOTHING,
  retry: { retries: 10, initialRetryTime: 200 },
});

const result = {};
const admin = kafka.admin();
await admin.connect();
result.created = await admin.createTopics({
  waitForLeaders: true,
  topics: [{ topic, numPartitions: 3, replicationFactor: 3,
             configEntries: [{ name: "min.insync.replicas", value: "2" }] }],
});
const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
result.partitions = metadata.topics[0].partitions
  .map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas.length }))
  .sort((a, b) => a.partition - b.partition);
const configs = await admin.describeConfigs({
  includeSynonyms: false,
  resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ["min.insync.replicas"] }],
});
result.minIsr = configs.resources[0].configEntries[0].configValue;

const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 5 });
await producer.connect();
const messages = [];
for (let i = 0; i < count; i++) messages.push({ key: `k-${i}`, value: `v-${i}` });
const sent = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages });
result.acked = sent.length;
await producer.disconnect();

const consumer = kafka.consumer({ groupId: `${topic}-group`, sessionTimeout: 10000,
                                  heartbeatInterval: 1000 });
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
const seen = new Map();
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`read ${seen.size} of ${count} in 60 s`)), 60000);
  consumer.run({
    eachMessage: async ({ message }) => {
      seen.set(message.key.toString(), message.value.toString());
      if (seen.size >= count) { clearTimeout(timer); resolve(); }
    },
  }).catch(reject);
});
await consumer.disconnect();
result.consumed = seen.size;
result.intact = [...seen].every(([k, v]) => k.slice(2) === v.slice(2));
await admin.deleteTopics({ topics: [topic] });
// The answer comes once the broker asked has dropped the topic; the others may take a
// moment more (Kafka's DeleteTopics is the same), and listTopics may ask any of them.
for (let i = 0; i < 50 && (await admin.listTopics()).includes(topic); i++) {
  await new Promise((resolve) => setTimeout(resolve, 200));
}
result.deleted = !(await admin.listTopics()).includes(topic);
await admin.disconnect();
console.log(JSON.stringify(result));
process.exit(0);
