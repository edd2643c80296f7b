import { ConfigError } from '../../config/env.js';
import type { BrokerCredentials } from './brokerSecret.js';
import type { RabbitManagement } from './RabbitManagement.js';
import type { TopologyDeclaration } from './topology.js';

/** RabbitMQ's three permission regexes of a user on one virtual host. */
export interface VhostPermissions {
  configure: string;
  write: string;
  read: string;
}

/**
 * The pipeline user's tags: `management` lets it read its own virtual host's queues over the
 * management API (the relay's queue depths) and nothing else: no policies, users or vhosts.
 */
export const PIPELINE_USER_TAGS = 'management';

const escapeRegex = (name: string) => name.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');

/**
 * What the pipeline user may touch: exactly the exchanges and queues of the declared topology
 * (anchored, every regex character escaped), for configure (its processes declare the topology
 * again at start and after a reconnect), write (publish, bind) and read (consume, bind, get).
 * Everything else in the virtual host, `amq.*` included, is refused.
 */
export function pipelinePermissions(topology: TopologyDeclaration): VhostPermissions {
  const names = [
    ...new Set([...topology.exchanges.map((e) => e.name), ...topology.queues.map((q) => q.name)]),
  ].sort();
  const only = `^(${names.map(escapeRegex).join('|')})$`;
  return { configure: only, write: only, read: only };
}

/**
 * Creates or updates the pipeline's broker user through the management API, run as the
 * broker's administrator (the user Amazon MQ created with the broker): password from its secret,
 * tags {@link PIPELINE_USER_TAGS}, {@link pipelinePermissions} on `vhost`, and no permission on
 * any other virtual host (removed if someone granted one). Idempotent; refuses to demote the
 * administrator it runs as.
 */
export async function ensurePipelineUser(
  management: RabbitManagement,
  options: { vhost: string; credentials: BrokerCredentials; topology: TopologyDeclaration },
): Promise<{ username: string; permissions: VhostPermissions }> {
  const { vhost, credentials } = options;
  const user = credentials.username;
  if (user === management.user) {
    throw new ConfigError(
      `broker pipeline user "${user}" is the administrator broker-setup runs as: give it a user of its own`,
    );
  }
  const u = encodeURIComponent(user);
  await management.request('PUT', `/api/users/${u}`, {
    password: credentials.password,
    tags: PIPELINE_USER_TAGS,
  });
  const permissions = pipelinePermissions(options.topology);
  await management.request('PUT', `/api/permissions/${encodeURIComponent(vhost)}/${u}`, {
    ...permissions,
  });
  const granted =
    (await management.request<{ vhost: string }[]>('GET', `/api/users/${u}/permissions`)) ?? [];
  for (const p of granted) {
    if (p.vhost === vhost) continue;
    await management.request('DELETE', `/api/permissions/${encodeURIComponent(p.vhost)}/${u}`);
  }
  const topic =
    (await management.request<{ vhost: string }[]>('GET', `/api/users/${u}/topic-permissions`)) ??
    [];
  for (const p of topic) {
    await management.request(
      'DELETE',
      `/api/topic-permissions/${encodeURIComponent(p.vhost)}/${u}`,
    );
  }
  return { username: user, permissions };
}
