import { CfnOutput, Duration, Stack, type StackProps } from 'aws-cdk-lib';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { RecursiveLoop } from 'aws-cdk-lib/aws-lambda';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { DbSide } from '../../shared/pipeline/appRole.js';
import { OUTBOX_TABLES } from '../../shared/pipeline/constants.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { snsTopicName } from '../../shared/transport/sqs/index.js';
import type { PipelineConfig } from '../config.js';
import {
  addQueueBoundAlarms,
  type DatabaseAccess,
  dataApiLogin,
  dataApiSettings,
  eventTopic,
  type FunctionSettings,
  functionEnvironment,
  NodeFunction,
  OutboxRelayFunction,
  PipelineAlarms,
  recursiveLoop,
  SqsConsumer,
  sqsEventSource,
  subscribeQueue,
} from '../constructs/index.js';
import { addDatabaseOutputs } from '../pipeline/DatabaseOutputs.js';
import { OrdersHttpApi } from '../pipeline/OrdersHttpApi.js';

export interface SqsPipelineStackProps extends StackProps {
  config: PipelineConfig;
  /** The cluster, the order service's database (the cluster's default) and each side's login. */
  database: DatabaseAccess<DbSide>;
  /**
   * The inventory service's database in the same cluster: reserve-inventory's, and the relay's
   * and maintenance's besides the order service's (`INVENTORY_DATA_API_DATABASE`).
   */
  inventoryDatabaseName: string;
  /** Off where the target cannot create them (moto has no CloudWatch alarms). Default on. */
  alarms?: boolean;
  /** Off where the target has no API Gateway v2. Default on. */
  httpApi?: boolean;
}

/**
 * The pipeline on SQS: place-order behind an IAM-authorized HTTP API, the outbox relay on a
 * 1-minute schedule, reserve-inventory on an SQS event source with partial batch responses, and
 * daily maintenance. Every function reaches the database through the RDS Data API.
 */
export class SqsPipelineStack extends Stack {
  readonly source: Queue;
  readonly parking: Queue;
  api: HttpApi | undefined;
  alarms: PipelineAlarms | undefined;

  constructor(scope: Construct, id: string, props: SqsPipelineStackProps) {
    super(scope, id, props);
    const { config, database } = props;
    // what the functions that reach the inventory service's database add to their environment
    const inventoryDb: FunctionSettings = { inventoryDataApiDatabase: props.inventoryDatabaseName };

    const resultsParking = new Queue(this, 'ResultsParking', {
      queueName: `${config.names.inventoryResultsQueue}-parking`,
      retentionPeriod: Duration.millis(config.retention.parkingMs),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    // Bounded by its retention (SQS deletes older messages unread), alarmed at half of it; shorter
    // than its parking's, since a result moves there with its enqueue time (infra/config.ts).
    const results = new Queue(this, 'Results', {
      queueName: config.names.inventoryResultsQueue,
      retentionPeriod: Duration.seconds(config.sqs.resultsRetentionSeconds),
      // read by the order-results function: at least 6 × its timeout, as for the source queue
      visibilityTimeout: Duration.seconds(config.sqs.visibilityTimeoutSeconds),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: resultsParking, maxReceiveCount: config.sqs.maxReceiveCount },
    });
    // Inventory's events reach their subscribers through a topic (fan-out): the order side's
    // results queue here, and any other service's queue subscribed to the topic (its ARN is an
    // output). What SNS cannot deliver to the results queue goes to its parking queue.
    const inventoryEvents = eventTopic(this, 'InventoryEvents', {
      topicName: snsTopicName(PIPELINE_TOPOLOGY.streams.inventory_outbox),
    });
    subscribeQueue(inventoryEvents, results, {
      types: PIPELINE_TOPOLOGY.subscriptions.results.types,
      deadLetterQueue: resultsParking,
    });
    new CfnOutput(this, 'InventoryEventsTopic', { value: inventoryEvents.topicArn });
    const topicArns = { inventory_outbox: inventoryEvents.topicArn };

    // reserve-inventory on the source queue (`inventory-orders`), parking in
    // `inventory-orders-parking`, on an SQS event source with partial batch responses. A parked
    // order event's notice (inventory.reservation_quarantined) goes straight to inventory's topic:
    // the database may be what is down.
    const reserve = new SqsConsumer(this, 'reserve-inventory-sqs', {
      name: 'reserve-inventory-sqs',
      timeoutSeconds: config.timeoutsSeconds.reserve,
      queue: {
        id: 'Source',
        queueName: config.names.inventoryQueue,
        retention: Duration.seconds(config.sqs.sourceRetentionSeconds),
        visibilityTimeoutSeconds: config.sqs.visibilityTimeoutSeconds,
        maxReceiveCount: config.sqs.maxReceiveCount,
      },
      parking: {
        id: 'Parking',
        queueName: config.names.parkingQueue,
        retention: Duration.millis(config.retention.parkingMs),
      },
      trigger: config.sqs,
      retryMode: config.sqs.retryMode,
      budget: config.budget,
      retention: config.retention,
      database: dataApiLogin(database, 'inventory'),
      sendsTo: [inventoryEvents],
      environment: functionEnvironment({ ...inventoryDb, sqs: { topicArns } }),
    });
    this.source = reserve.queue;
    this.parking = reserve.parkingQueue;

    // every function runs with the pipeline's budget and retention (what the queues were made for)
    const common: FunctionSettings = {
      transport: 'sqs',
      budget: config.budget,
      retention: config.retention,
      sqs: {
        sourceQueueUrl: this.source.queueUrl,
        parkingQueueUrl: this.parking.queueUrl,
        resultsQueueUrl: results.queueUrl,
      },
    };
    // each function reaches the database as its side's login (docs/design.md §9)
    const fn = (
      name: string,
      timeoutSeconds: number,
      side: DbSide,
      extra: FunctionSettings = {},
    ) => {
      const f = new NodeFunction(this, name, {
        name,
        timeoutSeconds,
        environment: {
          ...functionEnvironment({ ...common, dataApi: dataApiSettings(database, side) }),
          ...functionEnvironment(extra),
        },
      });
      database.grant(f, side);
      return f;
    };
    addDatabaseOutputs(this, database, props.inventoryDatabaseName);

    const placeOrder = fn('place-order', config.timeoutsSeconds.placeOrder, 'orders');
    if (props.httpApi !== false) {
      this.api = new OrdersHttpApi(this, 'Orders', { placeOrder, settings: config.httpApi }).api;
      new CfnOutput(this, 'ApiUrl', { value: this.api.apiEndpoint });
    }

    // kicked by the producers after COMMIT, ticked once a minute
    const relay = new OutboxRelayFunction(this, 'outbox-relay', {
      name: 'outbox-relay',
      timeoutSeconds: config.timeoutsSeconds.relay,
      settings: config.relay,
      database: dataApiLogin(database, 'relay'),
      publishesTo: [this.source, inventoryEvents],
      producers: [placeOrder, reserve],
      // each outbox is in its service's database
      environment: functionEnvironment({
        ...common,
        ...inventoryDb,
        sqs: { ...common.sqs, topicArns },
      }),
    });
    new CfnOutput(this, 'RelayFunction', { value: relay.functionName });

    // The order side's consumer of inventory's results (reserved, rejected, released): records
    // each order's reservation status from the events, so the results queue is read, not growing.
    // Its records are acknowledged or given back (partial batch response); a result given back
    // maxReceiveCount times moves to the results parking queue.
    const orderResults = fn('order-results-sqs', config.timeoutsSeconds.reserve, 'orders', {
      sqs: { visibilityTimeoutSeconds: config.sqs.visibilityTimeoutSeconds },
    });
    results.grantConsumeMessages(orderResults);
    orderResults.addEventSource(sqsEventSource(results, config.sqs));
    // The relay's chain through SQS and the kick is a loop by design: Lambda would stop it after
    // about 16 hops, the relay's kicks dropped and reserve's messages failed into parking. The
    // results consumer is invoked from the same chain (each relay hop's results) and sends
    // nothing back into it.
    recursiveLoop(RecursiveLoop.ALLOW, [relay, reserve, orderResults]);

    // both services' databases: their inboxes and outboxes
    const maintenance = fn(
      'maintenance',
      config.timeoutsSeconds.maintenance,
      'maintenance',
      inventoryDb,
    );
    new Rule(this, 'MaintenanceSchedule', {
      schedule: Schedule.rate(Duration.days(1)),
      targets: [new LambdaFunction(maintenance)],
    });

    if (props.alarms !== false) {
      const alarms = new PipelineAlarms(this, 'Alarms');
      relay.addAlarms(alarms, { outboxes: OUTBOX_TABLES });
      reserve.addAlarms(alarms, { errorsAlarmId: 'ReserveErrors', label: 'inventory consumer' });
      alarms.addFunctionErrorsAlarm(
        'OrderResultsErrors',
        orderResults,
        'The order side’s results consumer failed (its database?): the batch went back to the queue and orders show a stale reservation status.',
      );
      alarms.addFunctionErrorsAlarm(
        'MaintenanceErrors',
        maintenance,
        'The daily maintenance failed (retention sweep or inbox check).',
      );
      addQueueBoundAlarms(alarms, {
        sqsBounded: [
          {
            id: 'Results',
            queue: results,
            retentionSeconds: config.sqs.resultsRetentionSeconds,
            maxVisible: 1_000,
            consumer: orderResults,
          },
          {
            id: 'ResultsParking',
            queue: resultsParking,
            retentionSeconds: Math.floor(config.retention.parkingMs / 1000),
            maxVisible: 1,
            consumer: orderResults,
            backlogMeaning:
              'Inventory results are in the results parking queue: order-results gave them back maxReceiveCount times (its database down?). Their orders show a stale reservation status until they are moved back.',
          },
        ],
      });
      this.alarms = alarms;
      new CfnOutput(this, 'AlarmTopic', { value: alarms.topic.topicArn });
    }
  }
}
