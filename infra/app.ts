import { App, CfnOutput, Stack } from 'aws-cdk-lib';
import { RABBITMQ_NAMES } from '../shared/config/constants.js';

/**
 * The CDK app. For now it synthesizes one foundation stack that records the pinned topology names;
 * the data stack (Aurora Serverless v2 + Data API) and the SQS / Amazon MQ pipeline stacks are built
 * from the same config module in a later issue.
 */
const app = new App();
const stack = new Stack(app, 'ReliableMessagingFoundation', {
  description: 'reliable-messaging-serverless: foundation (pipeline stacks come later)',
});
new CfnOutput(stack, 'OrdersExchange', { value: RABBITMQ_NAMES.ordersExchange });
new CfnOutput(stack, 'InventoryQueue', { value: RABBITMQ_NAMES.inventoryQueue });
app.synth();
