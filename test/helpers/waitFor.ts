export { waitFor } from '../../shared/util/waitFor.js';
