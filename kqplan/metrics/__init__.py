"""Observed reality: what Kafka's brokers measured of each quota bucket, read from Prometheus.

``prometheus`` (the HTTP API client: instant and range queries, the range chunked under the
server's points limit, bounded retries, timeouts from ``kqplan.deadline``, every failure in
kqplan's words), ``source`` (where the metrics are: URL, selector, auth headers, name overrides),
``names`` (the default metric names and labels: the JMX exporter's output for
``examples/metrics/jmx-exporter.yml``, checked against a real broker), ``buckets`` (a series'
labels to the quota bucket, and the entity that supplies a bucket's quota, by the core's level
table), ``throttled`` (which buckets Kafka throttled in a window, and when that ended), ``usage``
(each bucket's usage over a window, for ``kqplan fleet usage``) and ``readings`` (watched buckets'
raw readings since a change, for ``apply --verify-enforcement``). Imports ``core``, ``files``,
``deadline`` and ``http``."""
