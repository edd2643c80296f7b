export { type JournalLine, JournalRecorder } from '../../shared/consumer/journalRecorder.js';
