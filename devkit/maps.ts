/** The value of `key` in `map`: made by `make` and stored there on first use. */
export function getOrSet<K, V>(map: Map<K, V>, key: K, make: (key: K) => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make(key);
    map.set(key, value);
  }
  return value;
}
