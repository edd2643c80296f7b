/**
 * The library's testing entry point (`reliable-messaging-serverless/testing`): the in-memory
 * backend, a fast reference with the port's semantics, for a user's unit tests of their handler
 * and for the contract suite; and the conformance kit, which runs a user's handler through the
 * failures an at-least-once broker and a database bring (duplicates, a lost ack, a rolled-back
 * COMMIT, poison messages, outages, redelivery storms, a killed consumer) on a real broker and
 * PostgreSQL, and reports each effect applied once, lost or duplicated (docs/conformance.md).
 */
export {
  MemoryBackend,
  type MemoryBackendConfig,
  memoryBackend,
  memoryModule,
} from '../transport/memory/index.js';
export {
  type ConformanceOptions,
  type ConformanceReport,
  type ConformanceServices,
  type ConformanceSubject,
  conformanceServicesFromEnv,
  type MessageTimeline,
  renderText as renderConformanceText,
  runConformance,
  SCENARIO_NAMES,
  type ScenarioAccounting,
  type ScenarioName,
  type ScenarioResult,
  type TimelineEntry,
  writeReport as writeConformanceReport,
} from './conformance/index.js';
