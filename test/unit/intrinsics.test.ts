import { describe, expect, it } from 'vitest';
import {
  type LocalReferences,
  resolveValue,
  type StackScope,
  UnresolvedReferenceError,
} from '../../devkit/lambda/intrinsics.js';

const data: StackScope = {
  stackName: 'Data',
  template: {
    Resources: {
      Db: { Type: 'AWS::RDS::DBCluster' },
      Secret: { Type: 'AWS::SecretsManager::Secret' },
    },
    Outputs: {
      DbRef: { Value: { Ref: 'Db' }, Export: { Name: 'Data:Db' } },
    },
  },
};
const pipeline: StackScope = {
  stackName: 'Pipeline',
  template: {
    Resources: {
      Queue: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 'q' } },
      Broker: { Type: 'AWS::AmazonMQ::Broker' },
      Topic: { Type: 'AWS::SNS::Topic' },
    },
  },
};

const refs: LocalReferences = {
  pseudo: { 'AWS::Region': 'us-east-1', 'AWS::AccountId': '000000000000', 'AWS::Partition': 'aws' },
  stacks: [data, pipeline],
  ref: (_s, id, r) =>
    r.Type === 'AWS::SQS::Queue'
      ? `http://127.0.0.1:9324/000000000000/${id}`
      : r.Type === 'AWS::RDS::DBCluster'
        ? 'local-db'
        : undefined,
  getAtt: (_s, id, attribute, r) =>
    r.Type === 'AWS::AmazonMQ::Broker' && attribute === 'AmqpEndpoints'
      ? ['amqp://127.0.0.1:5672']
      : r.Type === 'AWS::SQS::Queue' && attribute === 'Arn'
        ? `arn:aws:sqs:us-east-1:000000000000:${id}`
        : undefined,
};

describe('Function: resolveValue (CloudFormation values against local stand-ins)', () => {
  it('evaluates Ref, GetAtt, Join, Select, Sub and ImportValue', () => {
    expect(resolveValue({ Ref: 'Queue' }, pipeline, refs)).toBe(
      'http://127.0.0.1:9324/000000000000/Queue',
    );
    expect(
      resolveValue(
        { 'Fn::Select': [0, { 'Fn::GetAtt': ['Broker', 'AmqpEndpoints'] }] },
        pipeline,
        refs,
      ),
    ).toBe('amqp://127.0.0.1:5672');
    expect(
      resolveValue(
        {
          'Fn::Join': [
            '',
            [
              'arn:',
              { Ref: 'AWS::Partition' },
              ':rds:',
              { Ref: 'AWS::Region' },
              ':cluster:',
              { 'Fn::ImportValue': 'Data:Db' },
            ],
          ],
        },
        pipeline,
        refs,
      ),
    ).toBe('arn:aws:rds:us-east-1:cluster:local-db');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's Fn::Sub syntax
    const sub = '${AWS::StackName}/${Queue.Arn}';
    expect(resolveValue({ 'Fn::Sub': sub }, pipeline, refs)).toBe(
      'Pipeline/arn:aws:sqs:us-east-1:000000000000:Queue',
    );
    expect(resolveValue({ 'Fn::GetAtt': 'Queue.Arn' }, pipeline, refs)).toBe(
      'arn:aws:sqs:us-east-1:000000000000:Queue',
    );
    expect(resolveValue({ a: [1, 'x', { Ref: 'Queue' }] }, pipeline, refs)).toEqual({
      a: [1, 'x', 'http://127.0.0.1:9324/000000000000/Queue'],
    });
  });

  it('fails by path on what nothing local stands in for, never silently', () => {
    expect(() =>
      resolveValue({ Ref: 'Topic' }, pipeline, refs, 'fn: Environment.Variables.TOPIC'),
    ).toThrow(
      new UnresolvedReferenceError(
        'fn: Environment.Variables.TOPIC',
        'nothing local stands in for Ref Topic (AWS::SNS::Topic)',
      ),
    );
    expect(() => resolveValue({ Ref: 'Missing' }, pipeline, refs)).toThrow(/no resource Missing/);
    expect(() => resolveValue({ 'Fn::ImportValue': 'Nope' }, pipeline, refs)).toThrow(
      /no stack exports Nope/,
    );
    expect(() => resolveValue({ 'Fn::If': ['c', 1, 2] }, pipeline, refs)).toThrow(
      /Fn::If is not supported/,
    );
  });
});
