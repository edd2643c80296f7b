import { CfnOutput, Duration, Fn, Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { CfnBroker } from 'aws-cdk-lib/aws-amazonmq';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { Peer, Port, SecurityGroup, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { RecursiveLoop } from 'aws-cdk-lib/aws-lambda';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import type { DbSide } from '../../shared/pipeline/appRole.js';
import { OUTBOX_TABLES } from '../../shared/pipeline/constants.js';
import { RABBITMQ_NAMES, retryQueueName } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import {
  declaredTopology,
  QUEUE_BOUNDS,
  QUEUE_METRICS,
  rabbitRetryDelays,
} from '../../shared/transport/rabbitmq/index.js';
import { type BrokerSettings, DEFAULT_BROKER, type PipelineConfig } from '../config.js';
import {
  type AmazonMqAccess,
  AmazonMqConsumer,
  addFlowLogs,
  addQueueBoundAlarms,
  BrokerSetup,
  type DatabaseAccess,
  dataApiLogin,
  dataApiSettings,
  FROM_BROKER,
  type FunctionSettings,
  functionEnvironment,
  functionValues,
  NodeFunction,
  OutboxRelayFunction,
  PipelineAlarms,
  recursiveLoop,
  relayMetric,
} from '../constructs/index.js';
import { addDatabaseOutputs } from '../pipeline/DatabaseOutputs.js';
import { OrdersHttpApi } from '../pipeline/OrdersHttpApi.js';

export interface RabbitPipelineStackProps extends StackProps {
  config: PipelineConfig;
  /** The cluster, the order service's database (the cluster's default) and each side's login. */
  database: DatabaseAccess<DbSide>;
  /**
   * The inventory service's database in the same cluster: reserve-inventory's, and the relay's
   * and maintenance's besides the order service's (`INVENTORY_DATA_API_DATABASE`).
   */
  inventoryDatabaseName: string;
  broker?: Partial<BrokerSettings>;
  /** Default on. */
  alarms?: boolean;
  httpApi?: boolean;
}

/**
 * The pipeline on Amazon MQ for RabbitMQ: a private broker (single instance, or a three-node
 * cluster) whose credentials live in Secrets Manager, its topology and policies applied on deploy
 * through the management API, reserve-inventory on the Amazon MQ event source, the relay on a
 * 1-minute schedule. The functions that speak AMQP run in the broker's VPC (private subnets with
 * a NAT gateway for the Data API and Secrets Manager); place-order and maintenance need only the
 * Data API and stay outside.
 */
export class RabbitPipelineStack extends Stack {
  readonly broker: CfnBroker;
  /** The `pipeline` user's secret: the relay, reserve and the Amazon MQ event source use it. */
  readonly credentials: Secret;
  /** The broker's administrator (created with the broker): read by broker-setup only. */
  readonly adminCredentials: Secret;
  api: HttpApi | undefined;
  alarms: PipelineAlarms | undefined;

  constructor(scope: Construct, id: string, props: RabbitPipelineStackProps) {
    super(scope, id, props);
    const { config, database } = props;
    // what the functions that reach the inventory service's database add to their environment
    const inventoryDb: FunctionSettings = { inventoryDataApiDatabase: props.inventoryDatabaseName };
    const settings = { ...DEFAULT_BROKER, ...props.broker };

    const vpc = new Vpc(this, 'Vpc', {
      maxAzs: settings.deployment === 'cluster' ? 3 : 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'public', subnetType: SubnetType.PUBLIC },
        { name: 'app', subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      ],
    });
    addFlowLogs(vpc);
    const functionsSg = new SecurityGroup(this, 'FunctionsSg', {
      vpc,
      description: 'Functions that speak AMQP to the broker',
    });
    const brokerSg = new SecurityGroup(this, 'BrokerSg', {
      vpc,
      description: 'Amazon MQ broker: AMQPS and the management API from the functions only',
      allowAllOutbound: false,
    });
    brokerSg.addIngressRule(functionsSg, Port.tcp(5671), 'AMQPS from the functions');
    brokerSg.addIngressRule(functionsSg, Port.tcp(443), 'Management API from the functions');
    // The Amazon MQ event source polls from network interfaces Lambda places in the broker's
    // subnets with the broker's security group (Lambda DG, "Process Amazon MQ messages with
    // Lambda", network configuration): that group must let them reach the broker (AMQPS, to
    // itself) and the Lambda and Secrets Manager endpoints (HTTPS, here through the NAT gateway).
    brokerSg.addIngressRule(brokerSg, Port.tcp(5671), 'AMQPS from the Amazon MQ event source');
    brokerSg.addEgressRule(
      brokerSg,
      Port.tcp(5671),
      'Amazon MQ event source to the broker (AMQPS)',
    );
    brokerSg.addEgressRule(
      Peer.anyIpv4(),
      Port.tcp(443),
      'Amazon MQ event source to the Lambda, STS and Secrets Manager endpoints (via the NAT gateway)',
    );
    // Operators reach the private broker from inside the VPC with this group: a CloudShell VPC
    // environment or an SSM-managed instance in the private subnets (docs/deploy.md, "Reaching a deployment").
    const operatorSg = new SecurityGroup(this, 'OperatorSg', {
      vpc,
      description:
        'Operators (CloudShell VPC environment, SSM-managed instance) reaching the broker',
    });
    brokerSg.addIngressRule(
      operatorSg,
      Port.tcp(5671),
      'AMQPS from operators (cli parked redrive)',
    );
    brokerSg.addIngressRule(operatorSg, Port.tcp(443), 'Management API from operators');
    new CfnOutput(this, 'OperatorSecurityGroup', {
      description: 'Security group the broker admits: attach it to a CloudShell VPC environment',
      value: operatorSg.securityGroupId,
      exportName: `${this.stackName}-OperatorSecurityGroup`,
    });

    // Two broker users: Amazon MQ creates exactly one, an administrator, with the broker; the
    // broker-setup function (as that administrator) creates the pipeline user through the
    // management API, with permissions on the pipeline's exchanges and queues only.
    const brokerSecret = (id: string, username: string, description: string) => {
      const secret = new Secret(this, id, {
        description,
        generateSecretString: {
          secretStringTemplate: JSON.stringify({ username }),
          generateStringKey: 'password',
          // Amazon MQ refuses commas, colons and equals signs; URLs prefer no punctuation at all
          excludePunctuation: true,
          passwordLength: 32,
        },
      });
      Validations.of(secret).acknowledge({
        id: 'AwsSolutions::AwsSolutions-SMG4',
        reason:
          'Amazon MQ has no managed rotation for broker users: rotation is the manual procedure in docs/deploy.md, "Secret rotation".',
      });
      return secret;
    };
    this.credentials = brokerSecret(
      'BrokerCredentials',
      'pipeline',
      'Amazon MQ pipeline user: {"username","password"} (read by the relay, reserve and the event source)',
    );
    this.adminCredentials = brokerSecret(
      'BrokerAdminCredentials',
      'admin',
      'Amazon MQ administrator: {"username","password"} (read by broker-setup only)',
    );
    const privateSubnets = vpc.selectSubnets({ subnetType: SubnetType.PRIVATE_WITH_EGRESS });
    new CfnOutput(this, 'OperatorSubnets', {
      description: 'Private subnets (with NAT) for the operator environment',
      value: Fn.join(',', privateSubnets.subnetIds),
      exportName: `${this.stackName}-OperatorSubnets`,
    });
    this.broker = new CfnBroker(this, 'Broker', {
      brokerName: `${this.stackName}-broker`,
      engineType: 'RABBITMQ',
      engineVersion: settings.engineVersion,
      hostInstanceType: settings.instanceType,
      deploymentMode: settings.deployment === 'cluster' ? 'CLUSTER_MULTI_AZ' : 'SINGLE_INSTANCE',
      publiclyAccessible: false,
      autoMinorVersionUpgrade: true,
      subnetIds:
        settings.deployment === 'cluster'
          ? privateSubnets.subnetIds
          : privateSubnets.subnetIds.slice(0, 1),
      securityGroups: [brokerSg.securityGroupId],
      users: [
        {
          username: this.adminCredentials.secretValueFromJson('username').unsafeUnwrap(),
          password: this.adminCredentials.secretValueFromJson('password').unsafeUnwrap(),
        },
      ],
      logs: { general: true },
      encryptionOptions: { useAwsOwnedKey: true },
      maintenanceWindowStartTime: { dayOfWeek: 'SUNDAY', timeOfDay: '03:00', timeZone: 'UTC' },
    });

    // A broker user's access: the relay, reserve, order-results and the event sources read the
    // broker as the pipeline user, broker-setup as the administrator.
    const network = { vpc, securityGroup: functionsSg };
    const brokerAccess = (secret: Secret): AmazonMqAccess => ({
      brokerArn: this.broker.attrArn,
      brokerId: this.broker.ref,
      // the secret's ARN, never its value: the functions read it at cold start
      secret,
      amqpEndpoint: Fn.select(0, this.broker.attrAmqpEndpoints),
      managementEndpoint: Fn.select(0, this.broker.attrConsoleUrLs),
      vhost: config.rabbitmq.vhost,
      network,
    });
    const pipelineUser = brokerAccess(this.credentials);
    // every function runs with the pipeline's budget and retention (what the topology declares)
    const common: FunctionSettings = {
      transport: 'rabbitmq',
      budget: config.budget,
      retention: config.retention,
    };
    // each function reaches the database as its side's login (docs/design.md §9), or not at all;
    // place-order and maintenance need only the Data API and stay outside the VPC
    const fn = (
      name: string,
      timeoutSeconds: number,
      side: DbSide,
      extra: FunctionSettings = {},
    ) => {
      const f = new NodeFunction(this, name, {
        name,
        timeoutSeconds,
        environment: functionEnvironment({
          ...common,
          ...extra,
          dataApi: dataApiSettings(database, side),
        }),
      });
      database.grant(f, side);
      return f;
    };
    addDatabaseOutputs(this, database, props.inventoryDatabaseName);

    // The topology and policies, applied on deploy by broker-setup through a custom resource whose
    // version is a digest of what it declares (a changed retry ladder re-applies). broker-setup
    // runs as the administrator and creates the pipeline user from its secret; it has no database
    // access.
    const setup = new BrokerSetup(this, 'broker-setup', {
      name: 'broker-setup',
      broker: brokerAccess(this.adminCredentials),
      pipelineUser: this.credentials,
      declared: declaredTopology(PIPELINE_TOPOLOGY, config.budget, config.retention),
      budget: config.budget,
      retention: config.retention,
      dependsOn: [this.broker],
    });
    new CfnOutput(this, 'BrokerSetupFunction', { value: setup.functionName });

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
      broker: pipelineUser,
      // each outbox is in its service's database
      environment: functionEnvironment({ ...common, ...inventoryDb }),
    });
    new CfnOutput(this, 'RelayFunction', { value: relay.functionName });

    // The Amazon MQ event sources read their queues once the topology (and its policies) exists.
    const consumer = {
      broker: pipelineUser,
      dependsOn: [setup.topology],
      budget: config.budget,
      retention: config.retention,
    };
    const trigger = {
      batchSize: config.rabbitmq.batchSize,
      maxBatchingWindowSeconds: config.rabbitmq.maxBatchingWindowSeconds,
    };
    const reserve = new AmazonMqConsumer(this, 'reserve-inventory-rabbitmq', {
      name: 'reserve-inventory-rabbitmq',
      timeoutSeconds: config.timeoutsSeconds.reserve,
      ...consumer,
      ...trigger,
      queue: config.rabbitmq.queue,
      parkingQueue: config.rabbitmq.parkingQueue,
      triggerId: 'ReserveTrigger',
      database: dataApiLogin(database, 'inventory'),
      environment: functionEnvironment(inventoryDb),
    });
    relay.addProducer(placeOrder);
    relay.addProducer(reserve);

    // The order side's consumer of inventory's results (reserved, rejected, released): records
    // each order's reservation status from the events, so `orders.inventory-results` is read, not
    // growing.
    const orderResults = new AmazonMqConsumer(this, 'order-results-rabbitmq', {
      name: 'order-results-rabbitmq',
      timeoutSeconds: config.timeoutsSeconds.reserve,
      ...consumer,
      ...trigger,
      queue: RABBITMQ_NAMES.inventoryResultsQueue,
      parkingQueue: RABBITMQ_NAMES.resultsParkingQueue,
      triggerId: 'OrderResultsTrigger',
      database: dataApiLogin(database, 'orders'),
    });
    // No loop Lambda can follow here (the relay publishes over AMQP, Amazon MQ is not a service it
    // tracks): the chain ends at the kicked relay, and detection stays on for a real loop.
    recursiveLoop(RecursiveLoop.TERMINATE, [relay, reserve, orderResults]);

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
      relay.addAlarms(alarms, {
        outboxes: OUTBOX_TABLES,
        brokerQueueMetrics: { brokerId: this.broker.ref },
      });
      reserve.addAlarms(alarms, { errorsAlarmId: 'ReserveErrors', label: 'inventory consumer' });
      const resultsParking = RABBITMQ_NAMES.resultsParkingQueue;
      alarms.addAlarm('ResultsParkedMessages', {
        metric: relayMetric(QUEUE_METRICS.depth, { Queue: resultsParking }, 'Maximum'),
        threshold: 0,
        meaning: `Inventory results are in ${resultsParking}: the order side gave them back past the delivery limit (its database down?). Their orders show a stale reservation status until they are moved back.${FROM_BROKER}`,
        values: { transport: 'rabbitmq', ...functionValues(orderResults) },
      });
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
        brokerBounded: [
          {
            queue: RABBITMQ_NAMES.auditQueue,
            maxLength: QUEUE_BOUNDS.audit.maxLength,
            atBound: 'its oldest events are dropped (drop-head)',
          },
          {
            queue: RABBITMQ_NAMES.inventoryResultsQueue,
            maxLength: QUEUE_BOUNDS.inventoryResults.maxLength,
            atBound: 'publishes are refused and results wait in inventory_outbox',
          },
          {
            queue: config.rabbitmq.parkingQueue,
            maxLength: QUEUE_BOUNDS.parking.maxLength,
            atBound: 'parks are refused and messages are held in inventory.orders',
          },
          {
            queue: RABBITMQ_NAMES.resultsParkingQueue,
            maxLength: QUEUE_BOUNDS.resultsParking.maxLength,
            atBound: 'dead letters are refused and results are held in orders.inventory-results',
          },
          ...rabbitRetryDelays(config.budget).map((delay) => ({
            queue: retryQueueName(delay),
            maxLength: QUEUE_BOUNDS.retry.maxLength,
            atBound:
              'retry copies are refused and their messages given back (is the requeue route to inventory.orders there?)',
          })),
        ],
        brokerRoutes: [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.inventoryResultsQueue],
        brokerSetup: setup,
      });
      this.alarms = alarms;
      new CfnOutput(this, 'AlarmTopic', { value: alarms.topic.topicArn });
    }
  }

  /**
   * Three AZs pinned so `cdk synth` needs no credentials or lookups (an environment-agnostic
   * stack picks them from Fn::GetAZs at deploy): a cluster spreads its nodes over three.
   */
  override get availabilityZones(): string[] {
    return Token.isUnresolved(this.region)
      ? [0, 1, 2].map((i) => Fn.select(i, Fn.getAzs()))
      : [`${this.region}a`, `${this.region}b`, `${this.region}c`];
  }
}
