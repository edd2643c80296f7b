import { afterEach, describe, expect, it } from 'vitest';
import { fault, InjectedFaultError, parseFaults, setFaults } from '../../shared/faults.js';

describe('Fault points', () => {
  afterEach(() => setFaults(''));

  it('parses point:action lists', () => {
    expect(parseFaults('order.after-outbox-insert:throw, relay.after-publish:exit')).toEqual(
      new Map([
        ['order.after-outbox-insert', 'throw'],
        ['relay.after-publish', 'exit'],
      ]),
    );
    expect(parseFaults('')).toEqual(new Map());
  });

  it('refuses unknown points and actions with a clear message', () => {
    expect(() => parseFaults('relay.after-pubish:throw')).toThrow(
      /unknown fault point "relay.after-pubish"/,
    );
    expect(() => parseFaults('relay.after-publish:crash')).toThrow(/must be "throw" or "exit"/);
  });

  it('does nothing unless configured, throws where configured', () => {
    expect(() => fault('relay.after-publish')).not.toThrow();
    setFaults('relay.after-publish:throw');
    expect(() => fault('order.after-outbox-insert')).not.toThrow();
    expect(() => fault('relay.after-publish')).toThrow(InjectedFaultError);
  });
});
