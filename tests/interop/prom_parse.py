# Reads a Prometheus text exposition on stdin and prints it as JSON with the reference parser
# (Debian's python3-prometheus-client): {"family": {"type": ..., "samples": [[name, labels, value]]}}.
# A malformed exposition raises, so the test fails.
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    out[family.name] = {
        "type": family.type,
        "samples": [[s.name, s.labels, s.value] for s in family.samples],
    }
json.dump(out, sys.stdout)
