import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { type Credentials, parseCredentials } from '../../config/credentials.js';

/**
 * Amazon MQ credentials as Secrets Manager holds them: the JSON shape the Amazon MQ event
 * source's `BASIC_AUTH` reads, so one secret serves the broker, the trigger and the functions.
 */
export type BrokerCredentials = Credentials;

export function parseBrokerSecret(secretString: string | undefined): BrokerCredentials {
  return parseCredentials(secretString, 'broker secret');
}

/** Reads the broker credentials (at cold start, never from the environment). */
export async function readBrokerSecret(
  client: SecretsManagerClient,
  secretArn: string,
): Promise<BrokerCredentials> {
  const out = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
  return parseBrokerSecret(out.SecretString);
}

/**
 * Adds credentials (and a virtual host) to an endpoint Amazon MQ reports: `amqps://host:5671`
 * for AMQP, `https://host` for the management API.
 */
export function withCredentials(
  endpoint: string,
  credentials: BrokerCredentials,
  vhost?: string,
): string {
  const u = new URL(endpoint);
  u.username = encodeURIComponent(credentials.username);
  u.password = encodeURIComponent(credentials.password);
  if (vhost !== undefined) u.pathname = `/${encodeURIComponent(vhost)}`;
  return u.toString();
}
