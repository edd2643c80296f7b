import { createHash } from 'node:crypto';
import {
  CfnOutput,
  CustomResource,
  Duration,
  Fn,
  Stack,
  type StackProps,
  Token,
  Validations,
} from 'aws-cdk-lib';
import { CfnBroker } from 'aws-cdk-lib/aws-amazonmq';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import { Port, SecurityGroup, SubnetType, Vpc } from 'aws-cdk-lib/aws-ec2';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { CfnEventSourceMapping } from 'aws-cdk-lib/aws-lambda';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import {
  type FunctionSettings,
  functionEnvironment,
} from '../../shared/config/functionEnvironment.js';
import { declaredTopology } from '../../shared/transport/rabbitmq/index.js';
import { type BrokerSettings, DEFAULT_BROKER, type PipelineConfig } from '../config.js';
import { deployProvider } from '../constructs/deployProvider.js';
import { NodeFunction } from '../constructs/NodeFunction.js';
import { OrdersHttpApi } from '../constructs/OrdersHttpApi.js';
import { PipelineAlarms } from '../constructs/PipelineAlarms.js';
import { type DatabaseAccess, dataApiSettings } from './SqsPipelineStack.js';

export interface RabbitPipelineStackProps extends StackProps {
  config: PipelineConfig;
  database: DatabaseAccess;
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
  readonly credentials: Secret;
  api: HttpApi | undefined;
  alarms: PipelineAlarms | undefined;

  constructor(scope: Construct, id: string, props: RabbitPipelineStackProps) {
    super(scope, id, props);
    const { config, database } = props;
    const settings = { ...DEFAULT_BROKER, ...props.broker };

    const vpc = new Vpc(this, 'Vpc', {
      maxAzs: settings.deployment === 'cluster' ? 3 : 2,
      natGateways: 1,
      subnetConfiguration: [
        { name: 'public', subnetType: SubnetType.PUBLIC },
        { name: 'app', subnetType: SubnetType.PRIVATE_WITH_EGRESS },
      ],
    });
    vpc.addFlowLog('FlowLogs');
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
    // The Amazon MQ event source polls from network interfaces it places in the broker's subnets
    // with the broker's security group.
    brokerSg.addIngressRule(brokerSg, Port.tcp(5671), 'AMQPS from the Amazon MQ event source');

    this.credentials = new Secret(this, 'BrokerCredentials', {
      description:
        'Amazon MQ broker user: {"username","password"} (read by the functions and the event source)',
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ username: 'pipeline' }),
        generateStringKey: 'password',
        // Amazon MQ refuses commas, colons and equals signs; URLs prefer no punctuation at all
        excludePunctuation: true,
        passwordLength: 32,
      },
    });
    Validations.of(this.credentials).acknowledge({
      id: 'AwsSolutions::AwsSolutions-SMG4',
      reason:
        'Amazon MQ has no managed rotation for broker users: rotating means updating the broker user, then the secret (a documented manual step).',
    });
    const privateSubnets = vpc.selectSubnets({ subnetType: SubnetType.PRIVATE_WITH_EGRESS });
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
          username: this.credentials.secretValueFromJson('username').unsafeUnwrap(),
          password: this.credentials.secretValueFromJson('password').unsafeUnwrap(),
        },
      ],
      logs: { general: true },
      encryptionOptions: { useAwsOwnedKey: true },
      maintenanceWindowStartTime: { dayOfWeek: 'SUNDAY', timeOfDay: '03:00', timeZone: 'UTC' },
    });

    const network = { vpc, securityGroup: functionsSg };
    // every function runs with the pipeline's budget and retention (what the topology declares)
    const common: FunctionSettings = {
      transport: 'rabbitmq',
      dataApi: dataApiSettings(database),
      budget: config.budget,
      retention: config.retention,
    };
    const brokerAccess: FunctionSettings = {
      broker: {
        // the secret's ARN, never its value: the functions read it at cold start
        secretArn: this.credentials.secretArn,
        amqpEndpoint: Fn.select(0, this.broker.attrAmqpEndpoints),
        managementEndpoint: Fn.select(0, this.broker.attrConsoleUrLs),
        vhost: config.rabbitmq.vhost,
      },
    };
    const fn = (
      name: string,
      timeoutSeconds: number,
      options: { broker?: boolean; extra?: FunctionSettings } = {},
    ) => {
      const f = new NodeFunction(this, name, {
        name,
        timeoutSeconds,
        environment: {
          ...functionEnvironment(common),
          ...(options.broker ? functionEnvironment(brokerAccess) : {}),
          ...functionEnvironment(options.extra ?? {}),
        },
        ...(options.broker ? { network } : {}),
      });
      database.grant(f);
      if (options.broker) this.credentials.grantRead(f);
      return f;
    };

    const topology = this.topologyOnDeploy(fn('broker-setup', 120, { broker: true }), config);

    const placeOrder = fn('place-order', config.timeoutsSeconds.placeOrder);
    if (props.httpApi !== false) {
      this.api = new OrdersHttpApi(this, 'Orders', { placeOrder }).api;
      new CfnOutput(this, 'ApiUrl', { value: this.api.apiEndpoint });
    }

    const relay = fn('outbox-relay', config.timeoutsSeconds.relay, {
      broker: true,
      extra: { relay: config.relay },
    });
    new CfnOutput(this, 'RelayFunction', { value: relay.functionName });
    new Rule(this, 'RelaySchedule', {
      schedule: Schedule.rate(Duration.minutes(1)),
      targets: [new LambdaFunction(relay)],
    });

    const reserve = fn('reserve-inventory-rabbitmq', config.timeoutsSeconds.reserve, {
      broker: true,
    });
    // The event source reads the broker with the function's role: describe the broker, read its
    // secret (granted above), and manage its network interfaces in the broker's subnets.
    reserve.addToRolePolicy(
      new PolicyStatement({ actions: ['mq:DescribeBroker'], resources: [this.broker.attrArn] }),
    );
    reserve.addToRolePolicy(
      new PolicyStatement({
        actions: [
          'ec2:CreateNetworkInterface',
          'ec2:DeleteNetworkInterface',
          'ec2:DescribeNetworkInterfaces',
          'ec2:DescribeSecurityGroups',
          'ec2:DescribeSubnets',
          'ec2:DescribeVpcs',
        ],
        resources: ['*'],
      }),
    );
    Validations.of(reserve).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM5[Resource::*]',
      reason:
        'The Amazon MQ event source needs EC2 network-interface and Describe* actions, which support no resource-level scoping.',
    });
    const mapping = new CfnEventSourceMapping(this, 'ReserveTrigger', {
      functionName: reserve.functionName,
      eventSourceArn: this.broker.attrArn,
      queues: [config.rabbitmq.queue],
      batchSize: config.rabbitmq.batchSize,
      // whole seconds only: Lambda's default (500 ms) is had by leaving it unset
      maximumBatchingWindowInSeconds: config.rabbitmq.maxBatchingWindowSeconds,
      sourceAccessConfigurations: [
        { type: 'BASIC_AUTH', uri: this.credentials.secretArn },
        { type: 'VIRTUAL_HOST', uri: config.rabbitmq.vhost },
      ],
    });
    // the queue exists (and has its policies) before the event source starts reading it
    mapping.node.addDependency(topology);
    mapping.node.addDependency(reserve);

    if (props.alarms !== false) {
      this.alarms = new PipelineAlarms(this, 'Alarms', {
        relay,
        reserve,
        brokerQueues: { source: config.rabbitmq.queue, parking: config.rabbitmq.parkingQueue },
      });
      new CfnOutput(this, 'AlarmTopic', { value: this.alarms.topic.topicArn });
    }

    const maintenance = fn('maintenance', config.timeoutsSeconds.maintenance);
    new Rule(this, 'MaintenanceSchedule', {
      schedule: Schedule.rate(Duration.days(1)),
      targets: [new LambdaFunction(maintenance)],
    });
  }

  /**
   * The topology and policies, applied on deploy by the broker-setup function through a custom
   * resource whose version is a digest of what it declares (a changed retry ladder re-applies).
   */
  private topologyOnDeploy(setup: NodeFunction, config: PipelineConfig): CustomResource {
    const provider = deployProvider(this, 'BrokerSetupProvider', setup);
    const declared = JSON.stringify(declaredTopology(config.budget, config.retention));
    const resource = new CustomResource(this, 'BrokerTopology', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::BrokerTopology',
      properties: {
        version: createHash('sha256').update(declared).digest('hex').slice(0, 16),
        vhost: config.rabbitmq.vhost,
      },
    });
    resource.node.addDependency(this.broker);
    return resource;
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
