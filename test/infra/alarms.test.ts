import { readFileSync } from 'node:fs';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { METRICS_NAMESPACE } from '../../shared/config/constants.js';
import { CONSUMER_METRICS, CONSUMER_METRICS_SERVICE } from '../../shared/consumer/metrics.js';
import { OUTBOX_METRICS } from '../../shared/outbox/metrics.js';
import { OUTBOX_TABLES } from '../../shared/pipeline/constants.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { QUEUE_METRICS } from '../../shared/transport/rabbitmq/index.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * What the stacks' alarms, alarm topic, broker network and teardown promise, read from the
 * synthesized templates (CloudWatch, KMS and EC2 cannot run here).
 */
const _config = pipelineConfig();

type Resource = { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string };
type AlarmProps = {
  MetricName?: string;
  Namespace?: string;
  Statistic?: string;
  Dimensions?: { Name: string; Value: unknown }[];
  Period?: number;
  EvaluationPeriods: number;
  DatapointsToAlarm?: number;
  ComparisonOperator: string;
  Threshold: number;
  TreatMissingData?: string;
  AlarmActions?: unknown[];
  Metrics?: {
    Id: string;
    Expression?: string;
    Period?: number;
    MetricStat?: {
      Metric: {
        MetricName: string;
        Namespace: string;
        Dimensions?: { Name: string; Value: unknown }[];
      };
      Period: number;
      Stat: string;
    };
  }[];
};

const alarmsOf = (t: Template): AlarmProps[] =>
  Object.values(t.findResources('AWS::CloudWatch::Alarm')).map(
    (r) => (r as Resource).Properties as AlarmProps,
  );
const dim = (a: AlarmProps, name: string) => a.Dimensions?.find((d) => d.Name === name)?.Value;
/** Seconds of metrics an alarm looks at before it can change state. */
const window = (a: AlarmProps) => {
  const period = a.Period ?? Math.max(...(a.Metrics ?? []).map((m) => m.MetricStat?.Period ?? 0));
  return period * a.EvaluationPeriods;
};
/** The relay stopped: no datapoint at all. Does the alarm go to ALARM, and within 10 minutes? */
const silenceBreaches = (a: AlarmProps) => a.TreatMissingData === 'breaching' && window(a) <= 600;

// one synthesis for the whole file (about 20 s)
let t: ReturnType<typeof synthPipelines>;
beforeAll(() => {
  t = synthPipelines();
});

describe('CDK: alarms that reach someone and see a stopped relay', () => {
  const pipelines = () =>
    [
      ['sqs', t.sqs],
      ['rabbitmq', t.rabbit],
    ] as const;

  it('the alarm topic uses a rotated customer-managed key CloudWatch may use, for this account’s alarms only', () => {
    for (const [name, template] of pipelines()) {
      // the alarms' topic (the SQS stack also has inventory's event topic, for fan-out)
      const topics = Object.entries(template.findResources('AWS::SNS::Topic'))
        .filter(([id]) => id.startsWith('Alarms'))
        .map(([, r]) => r) as Resource[];
      expect(topics, name).toHaveLength(1);
      const keyRef = topics[0]?.Properties.KmsMasterKeyId as { 'Fn::GetAtt'?: [string, string] };
      // not alias/aws/sns: that AWS-managed key's policy cannot grant cloudwatch.amazonaws.com
      expect(keyRef['Fn::GetAtt']?.[1], name).toBe('Arn');
      const keyId = keyRef['Fn::GetAtt']?.[0] as string;
      const key = template.toJSON().Resources[keyId] as Resource;
      expect(key.Type, name).toBe('AWS::KMS::Key');
      expect(key.Properties.EnableKeyRotation, name).toBe(true);
      const fromOurAlarms = {
        StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
        ArnLike: {
          'aws:SourceArn': {
            'Fn::Join': [
              '',
              [
                'arn:',
                { Ref: 'AWS::Partition' },
                ':cloudwatch:',
                { Ref: 'AWS::Region' },
                ':',
                { Ref: 'AWS::AccountId' },
                ':alarm:*',
              ],
            ],
          },
        },
      };
      template.hasResourceProperties('AWS::KMS::Key', {
        KeyPolicy: {
          Statement: Match.arrayWith([
            {
              Sid: Match.anyValue(),
              Effect: 'Allow',
              Principal: { Service: 'cloudwatch.amazonaws.com' },
              Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
              Resource: '*',
              Condition: fromOurAlarms,
            },
          ]),
        },
      });
      template.hasResourceProperties('AWS::SNS::TopicPolicy', {
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: 'Allow',
              Principal: { Service: 'cloudwatch.amazonaws.com' },
              Action: 'sns:Publish',
              Condition: fromOurAlarms,
            }),
          ]),
        },
      });
      for (const a of alarmsOf(template)) expect(a.AlarmActions, name).toHaveLength(1);
    }
  });

  it('a stopped relay (schedule disabled) raises the heartbeat alarm of each outbox within 10 minutes', () => {
    for (const [name, template] of pipelines()) {
      const alarms = alarmsOf(template);
      for (const table of OUTBOX_TABLES) {
        const heartbeat = alarms.filter(
          (a) => a.MetricName === OUTBOX_METRICS.heartbeat && dim(a, 'Outbox') === table,
        );
        expect(heartbeat, `${name} ${table}`).toHaveLength(1);
        const [a] = heartbeat as [AlarmProps];
        expect(a).toMatchObject({
          Namespace: METRICS_NAMESPACE,
          Statistic: 'Sum',
          ComparisonOperator: 'LessThanThreshold',
          Threshold: 1,
        });
        expect(dim(a, 'service')).toBe('outbox-relay');
        expect(silenceBreaches(a), `${name} ${table}: ${window(a)} s, ${a.TreatMissingData}`).toBe(
          true,
        );
      }
      // only the heartbeat breaches on silence: it comes from every invocation (ticks included).
      // The outbox gauges come only from runs that read the outboxes (kicks, sweeps: hourly at
      // rest), the RabbitMQ depths and routes only when the relay could read the broker (its own
      // alarm, QueueMetricsUnavailable, says when it cannot): their silence is not a breach, or
      // one broker outage would raise every depth alarm at once
      const ours = alarms.filter((a) => a.Namespace === METRICS_NAMESPACE);
      expect(ours.length, name).toBeGreaterThanOrEqual(OUTBOX_TABLES.length * 5);
      for (const a of ours) {
        expect(a.TreatMissingData, `${name} ${a.MetricName} ${JSON.stringify(a.Dimensions)}`).toBe(
          a.MetricName === OUTBOX_METRICS.heartbeat ? 'breaching' : 'notBreaching',
        );
      }
      const mathOnOurs = alarms.filter((a) =>
        a.Metrics?.some((m) => m.MetricStat?.Metric.Namespace === METRICS_NAMESPACE),
      );
      for (const a of mathOnOurs) expect(a.TreatMissingData, name).toBe('notBreaching');
    }
  });

  it('rabbitmq: one alarm says the broker’s queues cannot be read (5 minutes without a successful look)', () => {
    const unavailable = alarmsOf(t.rabbit).filter((a) => a.MetricName === QUEUE_METRICS.available);
    expect(unavailable).toHaveLength(1);
    expect(unavailable[0]).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      Statistic: 'Maximum',
      Period: 300,
      EvaluationPeriods: 1,
      ComparisonOperator: 'LessThanThreshold',
      Threshold: 1,
      // a stopped relay publishes nothing: that is the heartbeat's alarm
      TreatMissingData: 'notBreaching',
    });
    expect(unavailable[0]?.Dimensions).toEqual([{ Name: 'service', Value: 'outbox-relay' }]);
    expect(alarmsOf(t.sqs).some((a) => a.MetricName === QUEUE_METRICS.available)).toBe(false);
  });

  it('a relay whose every round fails raises the round-error alarm of each outbox within 10 minutes', () => {
    for (const [name, template] of pipelines()) {
      const alarms = alarmsOf(template);
      for (const table of OUTBOX_TABLES) {
        const roundErrors = alarms.filter(
          (a) => a.MetricName === OUTBOX_METRICS.roundErrors && dim(a, 'Outbox') === table,
        );
        expect(roundErrors, `${name} ${table}`).toHaveLength(1);
        const [a] = roundErrors as [AlarmProps];
        // one failed round (a datapoint ≥ 1) is enough
        expect(a).toMatchObject({
          Statistic: 'Sum',
          ComparisonOperator: 'GreaterThanThreshold',
          Threshold: 0,
        });
        expect(window(a), `${name} ${table}`).toBeLessThanOrEqual(600);
      }
    }
  });

  it('inventory_outbox has every alarm outbox has', () => {
    for (const [name, template] of pipelines()) {
      const metricsOf = (table: string) =>
        alarmsOf(template)
          .filter((a) => dim(a, 'Outbox') === table)
          .map(
            (a) => `${a.MetricName} ${a.ComparisonOperator} ${a.Threshold} ${a.TreatMissingData}`,
          )
          .sort();
      expect(metricsOf('inventory_outbox'), name).toEqual(metricsOf('outbox'));
      expect(metricsOf('outbox').length, name).toBeGreaterThanOrEqual(5);
    }
  });

  it('new parked messages alarm on their own (the depth rose), not only "parking is non-empty"', () => {
    const parkingDepth: Record<
      string,
      (m: { MetricName: string; Dimensions?: AlarmProps['Dimensions'] }) => boolean
    > = {
      sqs: (m) =>
        m.MetricName === 'ApproximateNumberOfMessagesVisible' &&
        /^"?\{"Fn::GetAtt":\["Parking/.test(JSON.stringify(m.Dimensions?.[0]?.Value)),
      rabbitmq: (m) =>
        m.MetricName === QUEUE_METRICS.depth &&
        m.Dimensions?.some((d) => d.Name === 'Queue' && d.Value === RETRY_NAMES.parkingQueue) ===
          true,
    };
    for (const [name, template] of pipelines()) {
      const rises = alarmsOf(template).filter((a) => {
        const expression = a.Metrics?.find((m) => m.Expression !== undefined);
        const input = a.Metrics?.find((m) => m.MetricStat !== undefined)?.MetricStat?.Metric;
        return (
          expression?.Expression === `DIFF(${a.Metrics?.find((m) => m.MetricStat)?.Id})` &&
          input !== undefined &&
          parkingDepth[name]?.(input)
        );
      });
      expect(rises, name).toHaveLength(1);
      const [a] = rises as [AlarmProps];
      expect(a).toMatchObject({
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 0,
        // DIFF needs the preceding datapoint inside the evaluation range; one rise alarms
        EvaluationPeriods: 2,
        DatapointsToAlarm: 1,
      });
      expect(window(a), name).toBeLessThanOrEqual(600);
    }
  });

  it('SQS: the consumer backlog is watched besides the oldest age (which leaves out poison)', () => {
    const source = alarmsOf(t.sqs).filter((a) =>
      /^\{"Fn::GetAtt":\["Source/.test(JSON.stringify(dim(a, 'QueueName'))),
    );
    expect(source.map((a) => a.MetricName).sort()).toEqual([
      'ApproximateAgeOfOldestMessage',
      'ApproximateNumberOfMessagesVisible',
    ]);
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [
        {
          Name: 'QueueName',
          Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Source'), 'QueueName'] },
        },
      ],
      ComparisonOperator: 'GreaterThanThreshold',
    });
  });

  it('relay errors, consumer errors (results consumer too) and the daily maintenance each have an alarm; the relay’s throttles none (kicks beyond its concurrency are by design)', () => {
    for (const [name, template] of pipelines()) {
      const lambda = alarmsOf(template)
        .filter((a) => a.Namespace === 'AWS/Lambda')
        .map((a) => {
          const fn = dim(a, 'FunctionName') as { Ref: string };
          return `${fn.Ref.replace(/[0-9A-F]{8}$/, '')} ${a.MetricName}`;
        })
        .sort();
      expect(lambda, name).toEqual(
        [
          'maintenance Errors',
          'outboxrelay Errors',
          name === 'sqs' ? 'reserveinventorysqs Errors' : 'reserveinventoryrabbitmq Errors',
          name === 'sqs' ? 'orderresultssqs Errors' : 'orderresultsrabbitmq Errors',
        ].sort(),
      );
    }
  });
});

describe('CDK: the Amazon MQ event source network and the operators’ path to the broker', () => {
  const brokerSg = { 'Fn::GetAtt': [Match.stringLikeRegexp('^BrokerSg'), 'GroupId'] };

  it('the broker’s group (which the event source’s interfaces use) reaches the broker on 5671 and the endpoints on 443', () => {
    t.rabbit.hasResourceProperties('AWS::AmazonMQ::Broker', { SecurityGroups: [brokerSg] });
    // in: from itself on 5671
    t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
      GroupId: brokerSg,
      SourceSecurityGroupId: brokerSg,
      IpProtocol: 'tcp',
      FromPort: 5671,
      ToPort: 5671,
    });
    // out: to itself on 5671
    t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroupEgress', {
      GroupId: brokerSg,
      DestinationSecurityGroupId: brokerSg,
      IpProtocol: 'tcp',
      FromPort: 5671,
      ToPort: 5671,
    });
    // out: HTTPS to the Lambda, STS and Secrets Manager endpoints through the NAT gateway
    t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroup', {
      GroupDescription: Match.stringLikeRegexp('^Amazon MQ broker'),
      SecurityGroupEgress: [
        Match.objectLike({ CidrIp: '0.0.0.0/0', IpProtocol: 'tcp', FromPort: 443, ToPort: 443 }),
      ],
    });
    t.rabbit.resourceCountIs('AWS::EC2::NatGateway', 1);
  });

  it('an exported operator security group the broker admits on 5671 and 443', () => {
    const operatorSg = { 'Fn::GetAtt': [Match.stringLikeRegexp('^OperatorSg'), 'GroupId'] };
    for (const port of [5671, 443]) {
      t.rabbit.hasResourceProperties('AWS::EC2::SecurityGroupIngress', {
        GroupId: brokerSg,
        SourceSecurityGroupId: operatorSg,
        FromPort: port,
        ToPort: port,
      });
    }
    t.rabbit.hasOutput('OperatorSecurityGroup', {
      Value: operatorSg,
      Export: { Name: Match.anyValue() },
    });
    t.rabbit.hasOutput('OperatorSubnets', { Export: { Name: Match.anyValue() } });
  });
});

describe('CDK: what `cdk destroy` leaves behind, and the functions’ architecture', () => {
  const all = () =>
    [
      ['data', t.data],
      ['sqs', t.sqs],
      ['rabbitmq', t.rabbit],
    ] as const;

  it('every function, the custom-resource providers’ included, runs on arm64 and logs into a group of its stack', () => {
    for (const [name, template] of all()) {
      const functions = Object.entries(template.findResources('AWS::Lambda::Function'));
      expect(functions.length, name).toBeGreaterThan(0);
      for (const [id, f] of functions) {
        const p = (f as Resource).Properties as {
          Architectures?: string[];
          LoggingConfig?: { LogGroup?: { Ref: string } };
        };
        expect(p.Architectures, `${name} ${id}`).toEqual(['arm64']);
        // without one, Lambda creates /aws/lambda/<name> itself and it outlives the stack
        const group = p.LoggingConfig?.LogGroup?.Ref ?? '';
        expect(template.toJSON().Resources[group]?.Type, `${name} ${id}`).toBe(
          'AWS::Logs::LogGroup',
        );
      }
    }
  });

  it('only the Aurora final snapshot is kept on destroy, and the README says so (with the KMS key and broker logs)', () => {
    const kept = all().flatMap(([name, template]) =>
      Object.entries(template.toJSON().Resources as Record<string, Resource>)
        .filter(([, r]) => r.DeletionPolicy !== undefined && r.DeletionPolicy !== 'Delete')
        .map(([, r]) => `${name} ${r.Type} ${r.DeletionPolicy}`),
    );
    expect(kept).toEqual(['data AWS::RDS::DBCluster Snapshot']);
    for (const [name, template] of all()) {
      for (const key of Object.values(template.findResources('AWS::KMS::Key')) as Resource[]) {
        expect(key.DeletionPolicy, name).toBe('Delete');
        expect(key.Properties.PendingWindowInDays, name).toBe(7);
      }
    }
    const readme = readFileSync('README.md', 'utf8');
    const teardown = readme.slice(readme.indexOf('**Tear down.**'));
    expect(teardown).toMatch(/final snapshot/);
    expect(teardown).toMatch(/pending deletion/);
    expect(teardown).toMatch(/\/aws\/amazonmq\/broker/);
  });
});

describe('CDK: results that end in their parking queue raise an alarm', () => {
  it('rabbitmq: a result in orders.inventory-results.parking alarms at once', () => {
    const parked = alarmsOf(t.rabbit).filter(
      (a) =>
        a.MetricName === QUEUE_METRICS.depth &&
        dim(a, 'Queue') === RABBITMQ_NAMES.resultsParkingQueue,
    );
    expect(parked).toHaveLength(1);
    expect(parked[0]).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    // and its max-length bound, as for the other bounded queues
    const nearBound = alarmsOf(t.rabbit).filter(
      (a) =>
        a.MetricName === QUEUE_METRICS.ready &&
        dim(a, 'Queue') === RABBITMQ_NAMES.resultsParkingQueue,
    );
    expect(nearBound).toHaveLength(1);
  });

  it('sqs: one message visible in the results parking queue alarms', () => {
    t.sqs.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      Dimensions: [
        {
          Name: 'QueueName',
          Value: { 'Fn::GetAtt': [Match.stringLikeRegexp('^ResultsParking'), 'QueueName'] },
        },
      ],
    });
  });
});

describe('CDK: an alarm when dead-lettering itself fails', () => {
  const runbook = readFileSync('docs/operations.md', 'utf8');

  it('both stacks: ParkRefused (Sum > 0 over 5 min, missing data not breaching), with what to check and its runbook', () => {
    for (const [transport, template] of [
      ['sqs', t.sqs],
      ['rabbitmq', t.rabbit],
    ] as const) {
      const refused = alarmsOf(template).filter(
        (a) => a.MetricName === CONSUMER_METRICS.parkRefused,
      );
      expect(refused, transport).toHaveLength(1);
      const a = refused[0] as AlarmProps & { AlarmDescription: string };
      expect(a, transport).toMatchObject({
        Namespace: METRICS_NAMESPACE,
        Statistic: 'Sum',
        Period: 300,
        EvaluationPeriods: 1,
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
      });
      expect(dim(a, 'service')).toBe(CONSUMER_METRICS_SERVICE);
      expect(dim(a, 'Transport')).toBe(transport);
      expect(a.AlarmActions).toHaveLength(1);
      expect(a.AlarmDescription).toMatch(
        new RegExp(
          `^[^.]+[^]*\\. Check [^]+: \`npm run cli -- parked list --transport ${transport} --stack [^\`]+\`\\. Runbook: docs/operations\\.md#parkrefused$`,
        ),
      );
    }
    expect(runbook).toMatch(/^### ParkRefused$/m); // the anchor #parkrefused
  });

  it('rabbitmq: messages held for dead lettering alarm too (the relay publishes the count each minute)', () => {
    const held = alarmsOf(t.rabbit).filter(
      (a) => a.MetricName === QUEUE_METRICS.heldForDeadLettering,
    ) as (AlarmProps & { AlarmDescription: string })[];
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ Threshold: 0, ComparisonOperator: 'GreaterThanThreshold' });
    expect(dim(held[0] as AlarmProps, 'Queue')).toBe(RABBITMQ_NAMES.inventoryQueue);
    expect(held[0]?.AlarmDescription).toMatch(
      /Runbook: docs\/operations\.md#heldfordeadlettering$/,
    );
  });

  it("sqs: reserve-inventory may publish to inventory's topic (its park notices reach the results queue through it)", () => {
    const policies = Object.values(t.sqs.findResources('AWS::IAM::Policy')) as Resource[];
    const reserve = policies.filter((p) =>
      JSON.stringify(p.Properties.Roles).includes('reserveinventorysqs'),
    );
    const sends = reserve.flatMap(
      (p) =>
        (p.Properties.PolicyDocument as { Statement: { Action: unknown; Resource: unknown }[] })
          .Statement,
    );
    const toTopic = sends.filter(
      (st) =>
        JSON.stringify(st.Action).includes('sns:Publish') &&
        /"InventoryEvents[A-Za-z0-9]*"/.test(JSON.stringify(st.Resource)),
    );
    expect(toTopic).toHaveLength(1);
    // and the results queue is subscribed to that topic
    const subscriptions = Object.values(
      t.sqs.findResources('AWS::SNS::Subscription'),
    ) as Resource[];
    expect(
      subscriptions.filter(
        (s) =>
          s.Properties.Protocol === 'sqs' &&
          /"Results[A-Za-z0-9]*"/.test(JSON.stringify(s.Properties.Endpoint)) &&
          s.Properties.RawMessageDelivery === true,
      ),
    ).toHaveLength(1);
  });
});

describe('CDK: the relay kicked after COMMIT and ticked by its schedule', () => {
  const config = pipelineConfig();
  const pipelines = () =>
    [
      ['sqs', t.sqs, 'reserve-inventory-sqs'],
      ['rabbitmq', t.rabbit, 'reserve-inventory-rabbitmq'],
    ] as const;
  const functions = (template: Template) =>
    Object.entries(template.findResources('AWS::Lambda::Function')) as [string, Resource][];
  const byName = (template: Template, name: string) =>
    functions(template).find(([id]) => id.startsWith(name.replace(/-/g, ''))) as [string, Resource];

  it('the relay: unreserved by default, no asynchronous retry, events kept a minute, its state in an SSM parameter it alone reads and writes', () => {
    for (const [name, template] of pipelines()) {
      const [relayId, relay] = byName(template, 'outbox-relay');
      // a reservation fails the deploy on an account without 100 + it unreserved (new accounts)
      expect(config.relay.reservedConcurrency).toBe(0);
      expect(relay.Properties, name).not.toHaveProperty('ReservedConcurrentExecutions');
      template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
        FunctionName: { Ref: relayId },
        MaximumRetryAttempts: 0,
        MaximumEventAgeInSeconds: 60,
      });
      const params = Object.entries(template.findResources('AWS::SSM::Parameter')) as [
        string,
        Resource,
      ][];
      expect(params, name).toHaveLength(1);
      const env = (relay.Properties.Environment as { Variables: Record<string, unknown> })
        .Variables;
      expect(env.RELAY_STATE_PARAMETER, name).toEqual({ Ref: params[0]?.[0] });
      expect(env, name).toMatchObject({
        RELAY_LINGER_MS: String(config.relay.lingerMs),
        RELAY_SWEEP_QUIET_MS: String(config.relay.sweepQuietMs),
        RELAY_SWEEP_INTERVAL_MS: String(config.relay.sweepIntervalMs),
      });
      // the sweep runs less often than Aurora's auto-pause window (300 s)
      expect(config.relay.sweepQuietMs).toBeGreaterThanOrEqual(600_000);
      template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 minute)',
        Targets: Match.arrayWith([Match.objectLike({ Arn: { 'Fn::GetAtt': [relayId, 'Arn'] } })]),
      });
    }
  });

  it('place-order and reserve-inventory kick it: its name, the kick interval, and lambda:InvokeFunction on it alone', () => {
    for (const [name, template, reserveName] of pipelines()) {
      const [relayId] = byName(template, 'outbox-relay');
      for (const producer of ['place-order', reserveName]) {
        const [, fn] = byName(template, producer);
        const env = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
        expect(env.RELAY_FUNCTION_NAME, `${name} ${producer}`).toEqual({ Ref: relayId });
        expect(env.RELAY_KICK_INTERVAL_MS, `${name} ${producer}`).toBe(
          String(config.relay.kickIntervalMs),
        );
      }
      const invokers = Object.values(template.findResources('AWS::IAM::Policy')).flatMap((p) =>
        (
          (p as Resource).Properties.PolicyDocument as {
            Statement: { Action: string | string[]; Resource: unknown }[];
          }
        ).Statement.filter((s) => [s.Action].flat().includes('lambda:InvokeFunction')),
      );
      // (the custom resources' providers invoke their own functions)
      const toRelay = invokers.filter((s) => JSON.stringify(s.Resource).includes(relayId));
      expect(toRelay, name).toHaveLength(2);
      for (const s of toRelay) expect(s.Resource, name).toEqual({ 'Fn::GetAtt': [relayId, 'Arn'] });
      // the linger covers a kick skipped by the interval
      expect(config.relay.lingerMs).toBeGreaterThan(config.relay.kickIntervalMs);
    }
  });
});

describe('CDK: the relay without kicks or reserved concurrency (-c pipeline overrides)', () => {
  it('reservedConcurrency 0 leaves the relay unreserved; kick false gives the producers neither its name nor the permission', () => {
    const overridden = {
      ...pipelineConfig(),
      relay: { ...pipelineConfig().relay, reservedConcurrency: 0, kick: false },
    };
    const template = synthPipelines(overridden).sqs;
    const functions = Object.values(template.findResources('AWS::Lambda::Function')) as Resource[];
    expect(functions.some((f) => 'ReservedConcurrentExecutions' in f.Properties)).toBe(false);
    for (const f of functions) {
      const vars = (f.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables;
      expect(vars?.RELAY_FUNCTION_NAME).toBeUndefined();
    }
    expect(JSON.stringify(template.findResources('AWS::IAM::Policy'))).not.toContain(
      'lambda:InvokeFunction',
    );
  });
});
