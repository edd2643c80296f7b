import { fileURLToPath } from 'node:url';
import { App, CfnOutput, Stack } from 'aws-cdk-lib';
import { Topic } from 'aws-cdk-lib/aws-sns';
import {
  eventTopic,
  functionEnvironment,
  OutboxRelayFunction,
  PipelineAlarms,
  ServerlessDatabase,
  SqsConsumer,
} from 'reliable-messaging-serverless/cdk';
import { OUTBOX, TOPOLOGY } from '../src/shipping.js';

/**
 * The shipping service's stack, from the library's constructs: its own Aurora Serverless database
 * (Data API) with its two logins and its migrations, its consumer on a queue subscribed to
 * inventory's topic, its outbox relay publishing to its own topic, and the alarms.
 *
 *   npx cdk synth -c inventoryTopicArn=<the reference deployment's InventoryEventsTopic output>
 */
const path = (p: string) => fileURLToPath(new URL(p, import.meta.url));

const app = new App();
const inventoryTopicArn = app.node.tryGetContext('inventoryTopicArn') as string | undefined;
if (!inventoryTopicArn) {
  throw new Error(
    "-c inventoryTopicArn=<arn>: the topic of inventory's events (the reference deployment's InventoryEventsTopic output)",
  );
}
const stack = new Stack(app, app.node.tryGetContext('stackName') ?? 'Shipping');

const db = new ServerlessDatabase(stack, 'Db', {
  databaseName: 'shipping',
  // each side its own user, in a group role of migrations/0002_roles.sql
  logins: {
    service: { username: 'shipping_fn', group: 'shipping_app' },
    relay: { username: 'shipping_relay_fn', group: 'shipping_relay' },
  },
  migrate: { entry: path('../src/migrate.ts'), migrations: path('../migrations') },
});

const shipments = new SqsConsumer(stack, 'shipping', {
  entry: path('../src/lambda.ts'),
  database: db.login('service'),
  queue: { queueName: 'shipping-reservations' },
});
shipments.subscribeTo(Topic.fromTopicArn(stack, 'InventoryEvents', inventoryTopicArn), {
  types: TOPOLOGY.subscriptions.shipping?.types ?? [],
});

// the service's own events, for whoever subscribes next
const events = eventTopic(stack, 'ShippingEvents', { topicName: 'shipping' });
const relay = new OutboxRelayFunction(stack, 'relay', {
  entry: path('../src/relay.ts'),
  database: db.login('relay'),
  publishesTo: [events],
  producers: [shipments],
  environment: functionEnvironment({ sqs: { topicArns: { [OUTBOX]: events.topicArn } } }),
});

const alarms = new PipelineAlarms(stack, 'Alarms');
relay.addAlarms(alarms, { outboxes: [OUTBOX] });
shipments.addAlarms(alarms);
new CfnOutput(stack, 'ShippingEventsTopic', { value: events.topicArn });
