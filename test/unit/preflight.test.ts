import { describe, expect, it, vi } from 'vitest';
import { chooseImage, type FallbackResult, registryOf } from '../../devkit/containers.js';
import {
  type CommandRunner,
  type EnsureDeps,
  enableLocalManagement,
  ensureServices,
  type ServiceProblem,
} from '../../devkit/preflight.js';

const LISTENERS = [
  'Interface: [::], port: 15672, protocol: http, purpose: HTTP API',
  'Interface: 127.0.0.1, port: 25672, protocol: clustering, purpose: inter-node and CLI tool communication',
  'Interface: 127.0.0.1, port: 5672, protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0',
].join('\n');

/** A command runner that answers from a table and records what it ran. */
function runner(answers: Record<string, Awaited<ReturnType<CommandRunner>>>) {
  const ran: string[] = [];
  const run: CommandRunner = async (command, args) => {
    const line = [command, ...args].join(' ');
    ran.push(line);
    return (
      answers[command] ?? { status: null, stdout: '', stderr: '', error: `spawn ${command} ENOENT` }
    );
  };
  return { run, ran };
}

const ok = (stdout = '') => ({ status: 0, stdout, stderr: '' });
const LOCAL = ['amqp://guest:guest@127.0.0.1:5672', 'http://guest:guest@127.0.0.1:15672'] as const;

describe('Function: enableLocalManagement', () => {
  it('turns the plugin on for the local node that owns the AMQP port, says so once, waits for the API', async () => {
    // Prepare
    const { run, ran } = runner({
      'rabbitmq-diagnostics': ok(LISTENERS),
      'rabbitmq-plugins': ok(),
    });
    const log = vi.fn();
    const waitManagement = vi.fn(async () => {});
    // Act
    const result = await enableLocalManagement(...LOCAL, { run, log, waitManagement });
    // Assess
    expect(result).toEqual({ enabled: true });
    expect(ran).toEqual([
      'rabbitmq-diagnostics -q listeners',
      'rabbitmq-plugins -q enable rabbitmq_management',
    ]);
    expect(log).toHaveBeenCalledTimes(1);
    expect(log.mock.calls[0]?.[0]).toMatch(/management plugin was off .* turned it on/);
    expect(waitManagement).toHaveBeenCalledWith(LOCAL[1], 30_000);
  });

  it('leaves a broker on another machine alone (nothing run)', async () => {
    const { run, ran } = runner({});
    const result = await enableLocalManagement(
      'amqps://u:p@b-1.mq.us-east-1.amazonaws.com:5671',
      'https://u:p@b-1.mq.us-east-1.amazonaws.com',
      { run, log: vi.fn(), waitManagement: vi.fn() },
    );
    expect(result).toEqual({ reason: 'the broker is not on this machine' });
    expect(ran).toEqual([]);
  });

  it('leaves a local broker that is not the node the tools reach alone (a container on 5673)', async () => {
    const { run, ran } = runner({
      'rabbitmq-diagnostics': ok(LISTENERS),
      'rabbitmq-plugins': ok(),
    });
    const result = await enableLocalManagement(
      'amqp://guest:guest@127.0.0.1:5673',
      'http://guest:guest@127.0.0.1:15673',
      { run, log: vi.fn(), waitManagement: vi.fn() },
    );
    expect(result).toEqual({ reason: 'the local node does not listen for AMQP on port 5673' });
    expect(ran).toEqual(['rabbitmq-diagnostics -q listeners']);
  });

  it('says why when the tools are missing, refuse, or the API never answers', async () => {
    const deps = { log: vi.fn(), waitManagement: vi.fn(async () => {}) };
    expect(await enableLocalManagement(...LOCAL, { ...deps, run: runner({}).run })).toEqual({
      reason: 'no RabbitMQ tools here (spawn rabbitmq-diagnostics ENOENT)',
    });
    const cookie = runner({
      'rabbitmq-diagnostics': {
        status: 69,
        stdout: '',
        stderr: 'Error: unable to perform an operation on node\nmore',
      },
    });
    expect(await enableLocalManagement(...LOCAL, { ...deps, run: cookie.run })).toEqual({
      reason: 'rabbitmq-diagnostics failed: Error: unable to perform an operation on node',
    });
    const refused = runner({
      'rabbitmq-diagnostics': ok(LISTENERS),
      'rabbitmq-plugins': { status: 70, stdout: '', stderr: 'Error: eacces' },
    });
    expect(await enableLocalManagement(...LOCAL, { ...deps, run: refused.run })).toEqual({
      reason: 'rabbitmq-plugins enable failed: Error: eacces',
    });
    const silent = runner({ 'rabbitmq-diagnostics': ok(LISTENERS), 'rabbitmq-plugins': ok() });
    const never = vi.fn(async () => {
      throw new Error('timed out after 30000 ms waiting for the management API');
    });
    expect(
      await enableLocalManagement(...LOCAL, {
        run: silent.run,
        log: vi.fn(),
        waitManagement: never,
      }),
    ).toEqual({ reason: 'timed out after 30000 ms waiting for the management API' });
  });
});

const URLS = {
  databaseUrl: 'postgres://postgres@127.0.0.1:5432/test',
  amqpUrl: LOCAL[0],
  managementUrl: LOCAL[1],
};
const problem = (service: ServiceProblem['service']): ServiceProblem => ({
  service,
  address: 'x',
  hint: `start ${service}`,
  error: 'ECONNREFUSED',
});

function deps(overrides: Partial<EnsureDeps> & { down?: ServiceProblem['service'][] } = {}) {
  const down = new Set(overrides.down ?? []);
  const lines: string[] = [];
  const started: { postgres: boolean; rabbitmq: boolean }[] = [];
  const d: EnsureDeps = {
    checkPostgres: async () => (down.has('PostgreSQL') ? problem('PostgreSQL') : undefined),
    checkRabbitMq: async () => (down.has('RabbitMQ') ? problem('RabbitMQ') : undefined),
    checkRabbitManagement: async () =>
      down.has('RabbitMQ management API') ? problem('RabbitMQ management API') : undefined,
    enableManagement: async () => ({ reason: 'not here' }),
    startContainers: async (needs): Promise<FallbackResult> => {
      started.push(needs);
      return {
        ...(needs.postgres
          ? { databaseUrl: 'postgres://postgres:postgres@127.0.0.1:32770/test' }
          : {}),
        ...(needs.rabbitmq
          ? {
              amqpUrl: 'amqp://guest:guest@127.0.0.1:32771',
              managementUrl: 'http://guest:guest@127.0.0.1:32772',
            }
          : {}),
        started: [
          ...(needs.postgres ? ['PostgreSQL: local/postgres:15 at 127.0.0.1:32770'] : []),
          ...(needs.rabbitmq ? ['RabbitMQ: local/rabbitmq:4-management at 127.0.0.1:32771'] : []),
        ],
        notStarted: [],
        stop: async () => {},
      };
    },
    log: (line) => lines.push(line),
    ...overrides,
  };
  return { d, lines, started };
}

describe('Function: ensureServices', () => {
  it('uses the configured services when they answer, and starts nothing', async () => {
    const { d, lines, started } = deps();
    const s = await ensureServices(URLS, d);
    expect(s).toMatchObject({ ...URLS, problems: [] });
    expect(started).toEqual([]);
    expect(lines).toEqual([]);
  });

  it('turns a local management plugin on rather than starting a container', async () => {
    const enableManagement = vi.fn(async () => ({ enabled: true as const }));
    const { d, started } = deps({ down: ['RabbitMQ management API'], enableManagement });
    const s = await ensureServices(URLS, d);
    expect(s).toMatchObject({ ...URLS, problems: [] });
    expect(enableManagement).toHaveBeenCalledWith(URLS.amqpUrl, URLS.managementUrl);
    expect(started).toEqual([]);
  });

  it('starts RabbitMQ in a container when its management API cannot be turned on here', async () => {
    const { d, started } = deps({ down: ['RabbitMQ management API'] });
    const s = await ensureServices(URLS, d);
    expect(started).toEqual([{ postgres: false, rabbitmq: true }]);
    expect(s.amqpUrl).toBe('amqp://guest:guest@127.0.0.1:32771');
    expect(s.databaseUrl).toBe(URLS.databaseUrl);
  });

  it('starts what does not answer in containers, one line each', async () => {
    const { d, lines, started } = deps({ down: ['PostgreSQL', 'RabbitMQ'] });
    const s = await ensureServices(URLS, d);
    expect(started).toEqual([{ postgres: true, rabbitmq: true }]);
    expect(s).toMatchObject({
      databaseUrl: 'postgres://postgres:postgres@127.0.0.1:32770/test',
      managementUrl: 'http://guest:guest@127.0.0.1:32772',
      problems: [],
    });
    expect(lines).toEqual([
      'not answering, started in a container instead: PostgreSQL: local/postgres:15 at 127.0.0.1:32770',
      'not answering, started in a container instead: RabbitMQ: local/rabbitmq:4-management at 127.0.0.1:32771',
    ]);
  });

  it('reports what neither answers nor starts in one line: how to start it, and why no container', async () => {
    const { d } = deps({
      down: ['PostgreSQL'],
      startContainers: async () => ({
        started: [],
        notStarted: [{ service: 'PostgreSQL', reason: 'no container engine (no socket)' }],
        stop: async () => {},
      }),
    });
    const s = await ensureServices(URLS, d);
    expect(s.problems).toEqual([
      'PostgreSQL is not reachable at x (ECONNREFUSED); start PostgreSQL (no container either: no container engine (no socket))',
    ]);
  });

  it('without the fallback, only reports', async () => {
    const { d } = deps({ down: ['RabbitMQ'], startContainers: false });
    const s = await ensureServices(URLS, d);
    expect(s.problems).toEqual(['RabbitMQ is not reachable at x (ECONNREFUSED); start RabbitMQ']);
  });
});

describe('Function: chooseImage', () => {
  const facts = (present: string[], registry: boolean, env: Record<string, string> = {}) => ({
    env,
    present: async (image: string) => present.includes(image),
    registryAnswers: async () => registry,
  });

  it('takes the image the environment names, pulling it only where a registry answers', async () => {
    const env = { RABBITMQ_IMAGE: 'mine:1' };
    expect(await chooseImage('rabbitmq', facts(['mine:1'], false, env))).toEqual({
      image: 'mine:1',
      pull: false,
    });
    expect(await chooseImage('rabbitmq', facts([], true, env))).toEqual({
      image: 'mine:1',
      pull: true,
    });
    expect(await chooseImage('rabbitmq', facts([], false, env))).toEqual({
      reason:
        'mine:1 (RABBITMQ_IMAGE) is not in the engine and registry-1.docker.io does not answer',
    });
  });

  it('prefers the registry image the engine has, then the local build, then a pull', async () => {
    expect(
      await chooseImage(
        'rabbitmq',
        facts(['rabbitmq:4.2-management', 'local/rabbitmq:4-management'], false),
      ),
    ).toEqual({ image: 'rabbitmq:4.2-management', pull: false });
    expect(await chooseImage('rabbitmq', facts(['local/rabbitmq:4-management'], true))).toEqual({
      image: 'local/rabbitmq:4-management',
      pull: false,
    });
    expect(await chooseImage('postgres', facts([], true))).toEqual({
      image: 'postgres:15',
      pull: true,
    });
  });

  it('never pulls where no registry answers: says what to build or set', async () => {
    expect(await chooseImage('postgres', facts([], false))).toEqual({
      reason:
        'no postgres image in the engine and registry-1.docker.io does not answer (build local/postgres:15 with devkit/containers/build-images.sh postgres15)',
    });
    expect(await chooseImage('localstack', facts([], false))).toEqual({
      reason:
        'no localstack image in the engine and registry-1.docker.io does not answer (set LOCALSTACK_IMAGE to an image the engine has)',
    });
  });

  it('knows which registry an image comes from', () => {
    expect(registryOf('postgres:15')).toBe('registry-1.docker.io');
    expect(registryOf('localstack/localstack:4')).toBe('registry-1.docker.io');
    expect(registryOf('public.ecr.aws/docker/library/postgres:15')).toBe('public.ecr.aws');
    expect(registryOf('localhost:5000/rabbitmq:4')).toBe('localhost:5000');
  });
});
