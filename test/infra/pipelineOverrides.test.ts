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

  it('the relay and place-order reserve no concurrency unless asked (0: unreserved); the API throttles by default', () => {
    const defaults = pipelineConfigFromContext(undefined);
    expect(defaults.relay.reservedConcurrency).toBe(0);
    expect(defaults.httpApi).toEqual({
      throttlingRateLimit: 50,
      throttlingBurstLimit: 100,
      placeOrderReservedConcurrency: 0,
    });
    const c = pipelineConfigFromContext(
      '{"relay":{"reservedConcurrency":2},"httpApi":{"throttlingRateLimit":200,"placeOrderReservedConcurrency":20}}',
    );
    expect(c.relay.reservedConcurrency).toBe(2);
    expect(c.httpApi).toEqual({
      throttlingRateLimit: 200,
      throttlingBurstLimit: 100,
      placeOrderReservedConcurrency: 20,
    });
  });

  it('refuses a concurrency or throttle that cannot deploy, and a retention a parking queue cannot outlive', () => {
    expect(() => pipelineConfigFromContext({ relay: { reservedConcurrency: -1 } })).toThrow(
      /relay\.reservedConcurrency: -1/,
    );
    expect(() =>
      pipelineConfigFromContext({ httpApi: { placeOrderReservedConcurrency: 1.5 } }),
    ).toThrow(/httpApi\.placeOrderReservedConcurrency/);
    expect(() => pipelineConfigFromContext({ httpApi: { throttlingRateLimit: 0 } })).toThrow(
      /throttlingRateLimit 0 must be above 0/,
    );
    expect(() => pipelineConfigFromContext({ httpApi: { throttlingBurstLimit: 0 } })).toThrow(
      /throttlingBurstLimit 0/,
    );
    expect(() => pipelineConfigFromContext({ httpApi: { rateLimit: 5 } })).toThrow(
      /httpApi\.rateLimit: unknown/,
    );
    // a result reaches its parking queue with its enqueue time: it would expire there at once
    expect(() =>
      pipelineConfigFromContext({ sqs: { resultsRetentionSeconds: 14 * 24 * 3600 } }),
    ).toThrow(/sqs\.resultsRetentionSeconds: 1209600 s must be below the parking retention/);
    // a source kept longer than a 7-day parking retention
    const week = { parkingMs: 7 * 24 * 3600 * 1000, inboxMs: 10 * 24 * 3600 * 1000 };
    expect(() =>
      pipelineConfigFromContext({
        retention: week,
        sqs: { sourceRetentionSeconds: 14 * 24 * 3600 },
      }),
    ).toThrow(/sqs\.sourceRetentionSeconds: 1209600 s must be at most the parking retention/);
    // unset, both queues' retentions follow a shorter parking retention
    expect(pipelineConfigFromContext({ retention: week }).sqs).toMatchObject({
      sourceRetentionSeconds: 7 * 24 * 3600,
      resultsRetentionSeconds: 3.5 * 24 * 3600,
    });
  });
});
