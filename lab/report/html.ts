import type { LabReport } from '../types.js';

export function renderHtml(report: LabReport): string {
  return `<!doctype html><pre>${JSON.stringify(report.allHeld)}</pre>`;
}
