import { describe, expect, it } from 'vitest';
import { pipelineConfig, pipelineConfigFromContext } from '../../infra/config.js';

/** `cdk synth -c pipeline='{…}'`: single settings changed, the derived ones following. */
describe('Function: pipelineConfigFromContext', () => {
  it('is the default pipeline without the context value', () => {
    expect(pipelineConfigFromContext(undefined)).toEqual(pipelineConfig());
  });

  it('overrides single settings; what derives from one follows it unless set itself', () => {
    const c = pipelineConfigFromContext(
      JSON.stringify({
        sqs: { batchSize: 3, maxConcurrency: 2, retryMode: 'resend' },
        timeoutsSeconds: { reserve: 2 },
        budget: { maxAttempts: 1 },
      }),
    );
    expect(c.sqs).toMatchObject({
      batchSize: 3,
      maxConcurrency: 2,
      retryMode: 'resend',
      visibilityTimeoutSeconds: 12,
      maxReceiveCount: 4,
    });
    expect(c.timeoutsSeconds).toMatchObject({ reserve: 2, relay: 60 });
    expect(
      pipelineConfigFromContext({ rabbitmq: { maxBatchingWindowSeconds: 1 } }).rabbitmq,
    ).toMatchObject({ maxBatchingWindowSeconds: 1, batchSize: 100 });
  });

  it('refuses an unknown or mistyped setting, and a combination the runtime would refuse', () => {
    expect(() => pipelineConfigFromContext('{"sqs":{"batchSise":3}}')).toThrow(/sqs.batchSise/);
    expect(() => pipelineConfigFromContext('{"sqs":{"batchSize":"3"}}')).toThrow(/sqs.batchSize/);
    expect(() => pipelineConfigFromContext('{"names":{}}')).toThrow(/unknown section names/);
    expect(() => pipelineConfigFromContext('not json')).toThrow(/not JSON/);
    expect(() => pipelineConfigFromContext({ sqs: { visibilityTimeoutSeconds: 60 } })).toThrow(
      /visibilityTimeoutSeconds/,
    );
  });
});
