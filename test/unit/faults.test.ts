import { afterEach, describe, expect, it } from 'vitest';
import { FaultScope, parseFaults, setFaults } from '../../shared/config/faults.js';
import { fault, InjectedFaultError } from '../../shared/index.js';

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

describe('Fault scopes', () => {
  it('fire only inside their own scope, as often as armed, across awaits and timers', async () => {
    const a = new FaultScope();
    const b = new FaultScope();
    a.arm('reserve.after-commit', 2);
    const outside = () => fault('reserve.after-commit');
    expect(outside).not.toThrow();
    await b.run(async () => {
      await new Promise((r) => setTimeout(r, 1));
      expect(outside).not.toThrow();
    });
    await a.run(async () => {
      await new Promise((r) => setTimeout(r, 1));
      expect(outside).toThrow(InjectedFaultError);
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          expect(outside).toThrow(/reserve.after-commit/);
          resolve();
        }, 1),
      );
      expect(outside).not.toThrow(); // fired twice: inert again
    });
    expect(a.fired.map((f) => f.point)).toEqual(['reserve.after-commit', 'reserve.after-commit']);
    expect(b.fired).toEqual([]);
  });

  it('disarm stops a point before it fires', () => {
    const a = new FaultScope();
    a.arm('relay.after-publish');
    a.disarm();
    expect(() => a.run(() => fault('relay.after-publish'))).not.toThrow();
  });
});
