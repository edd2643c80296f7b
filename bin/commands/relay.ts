import { InvokeCommand, type InvokeCommandOutput, LambdaClient } from '@aws-sdk/client-lambda';
import type { Command } from 'commander';
import { STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { DRAIN_SOURCE, type DrainEvent } from '../../shared/outbox/kick.js';
import type { RelaySummary } from '../../shared/outbox/lambdaHandler.js';
import { OUTBOX_TABLES } from '../../shared/pipeline/constants.js';
import { describeStack, OperatorError, outputOf, stackOption } from './stack.js';

export function registerRelayCommands(program: Command): void {
  const relay = program.command('relay').description('the deployed outbox relay');
  relay
    .command('drain')
    .description(
      "invoke the stack's relay now, synchronously, with a drain event: it publishes what both outboxes hold (until no row came for its linger, within its budget) and answers its summary",
    )
    .addOption(stackOption().makeOptionMandatory())
    .option('--json', 'print the summary as the relay returned it')
    .action(async (opts: { stack: string; json?: boolean }) => {
      const stack = await describeStack(opts.stack);
      const functionName = outputOf(stack, STACK_OUTPUTS.relayFunction);
      const event: DrainEvent = { source: DRAIN_SOURCE, from: 'cli' };
      const lambda = new LambdaClient({ region: stack.region });
      let out: InvokeCommandOutput;
      try {
        out = await lambda.send(
          new InvokeCommand({
            FunctionName: functionName,
            InvocationType: 'RequestResponse',
            Payload: new TextEncoder().encode(JSON.stringify(event)),
          }),
        );
      } catch (err) {
        const e = err as { name?: string; message?: string };
        throw new OperatorError(
          `lambda:InvokeFunction ${functionName} (stack ${stack.name}, ${stack.region}) failed: ${e.name ?? 'Error'}: ${e.message ?? String(err)}`,
        );
      } finally {
        lambda.destroy();
      }
      const text = out.Payload ? new TextDecoder().decode(out.Payload) : '';
      if (out.FunctionError) {
        // the function failed (e.g. the broker did not answer): its error, and exit 1
        console.error(`relay ${functionName} failed (${out.FunctionError}): ${text}`);
        process.exitCode = 1;
        return;
      }
      const summary = JSON.parse(text || '{}') as RelaySummary;
      if (opts.json) console.log(JSON.stringify(summary, null, 2));
      else {
        console.log(`relay ${functionName}: ${summary.mode ?? '?'}`);
        console.table(
          OUTBOX_TABLES.map((t) => {
            const r = summary[t];
            return {
              outbox: t,
              published: r?.published ?? 0,
              failed: r?.failed ?? 0,
              'set aside': r?.setAside ?? 0,
              'now need attention': r?.needsAttention ?? 0,
              rounds: r?.rounds ?? 0,
              'round errors': r?.roundErrors ?? 0,
              'broker unavailable': r?.brokerUnavailableRounds ?? 0,
            };
          }),
        );
      }
      const troubled = OUTBOX_TABLES.some((t) => {
        const r = summary[t];
        return (
          (r?.roundErrors ?? 0) > 0 || (r?.brokerUnavailableRounds ?? 0) > 0 || (r?.failed ?? 0) > 0
        );
      });
      if (troubled) {
        console.error(
          'the drain met errors (rows failed, rounds threw, or the broker was unavailable): see the relay log; `outbox status --stack …` lists rows needing attention',
        );
        process.exitCode = 1;
      }
    });
}
