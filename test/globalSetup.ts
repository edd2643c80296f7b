import type { TestProject } from 'vitest/node';
import {
  checkPostgres,
  checkRabbitManagement,
  checkRabbitMq,
  describeProblem,
  type ServiceProblem,
} from '../shared/local/preflight.js';

export interface TestServices {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    services: TestServices;
  }
}

const stops: (() => Promise<unknown>)[] = [];

/**
 * Makes sure PostgreSQL and RabbitMQ (with its management API) answer before any test runs.
 * Where one does not but a Docker engine does, it is started with testcontainers; with neither,
 * the run stops with one line saying what to start.
 */
export async function setup(project: TestProject): Promise<void> {
  const services: TestServices = {
    databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    amqpUrl: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    managementUrl: process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672',
  };
  const pgProblem = await checkPostgres(services.databaseUrl);
  let rabbitProblem: ServiceProblem | undefined = await checkRabbitMq(services.amqpUrl);
  const managementProblem = rabbitProblem
    ? undefined
    : await checkRabbitManagement(services.managementUrl);
  if (managementProblem) throw new Error(describeProblem(managementProblem));

  if (pgProblem || rabbitProblem) {
    const missing = [pgProblem, rabbitProblem].filter(Boolean) as ServiceProblem[];
    let dockerError: string | undefined;
    try {
      if (pgProblem) {
        const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
        const c = await new PostgreSqlContainer('postgres:15-alpine')
          .withUsername('postgres')
          .withPassword('postgres')
          .withDatabase('test')
          .start();
        stops.push(() => c.stop());
        services.databaseUrl = c.getConnectionUri();
      }
      if (rabbitProblem) {
        const { RabbitMQContainer } = await import('@testcontainers/rabbitmq');
        const c = await new RabbitMQContainer('rabbitmq:3.13-management').start();
        stops.push(() => c.stop());
        services.amqpUrl = c.getAmqpUrl();
        services.managementUrl = `http://guest:guest@${c.getHost()}:${c.getMappedPort(15672)}`;
        rabbitProblem = undefined;
      }
    } catch (err) {
      dockerError = (err as Error).message.split('\n')[0];
    }
    if (dockerError) {
      throw new Error(
        `${missing.map(describeProblem).join('; ')}; and no Docker engine for testcontainers (${dockerError})`,
      );
    }
    process.stdout.write(
      `started with testcontainers: ${missing.map((m) => m.service).join(', ')}\n`,
    );
  }
  process.env.DATABASE_URL = services.databaseUrl;
  process.env.AMQP_URL = services.amqpUrl;
  process.env.RABBITMQ_MANAGEMENT_URL = services.managementUrl;
  project.provide('services', services);
}

export async function teardown(): Promise<void> {
  await Promise.all(stops.map((stop) => stop()));
}
