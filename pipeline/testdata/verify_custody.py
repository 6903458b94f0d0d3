#!/usr/bin/env python3
"""Independent custody verifier for file-sink records (docs/integrity.md).

Recomputes payload_hash, metadata_hash and record_hash of every record
named on the command line from the stored record alone, with Python's own
JSON encoder (sorted keys, compact, non-ASCII kept), and checks each
chain link that names a record among them. Prints one line per record:
"<path> ok" or "<path> mismatch <hash>[,<hash>...]", then "links N".
"""
import hashlib
import json
import sys


def canon(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest(alg, data):
    return (hashlib.sha512 if alg == "sha512" else hashlib.sha256)(data).hexdigest()


def main(paths):
    records = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            records[path] = json.load(f)
    by_hash = {r["custody"]["record_hash"]: p for p, r in records.items() if r.get("custody")}
    bad = {}
    links = 0
    for path, rec in records.items():
        c = rec["custody"]
        alg = c["algorithm"]
        meta = dict(rec["metadata"])
        meta.pop("custody", None)
        ts = dict(meta["timestamps"])
        ts.pop("stored_at", None)
        ts.pop("stored_at_epoch_ns", None)
        meta["timestamps"] = ts
        fr = dict(meta["freshness"])
        if "event_age_at_store_seconds" in fr:
            fr["event_age_at_store_seconds"] = fr["event_age_at_receive_seconds"]
        meta["freshness"] = fr
        failed = []
        if c["payload_hash"] is not None and digest(alg, canon(rec["payload"])) != c["payload_hash"]:
            failed.append("payload_hash")
        if c["metadata_hash"] is not None and digest(alg, canon(meta)) != c["metadata_hash"]:
            failed.append("metadata_hash")
        js = meta.get("jetstream") or {}
        rin = {
            "algorithm": c["algorithm"], "key_id": c["key_id"], "message_id": meta["message_id"],
            "metadata_hash": c["metadata_hash"], "payload_hash": c["payload_hash"],
            "previous_record_hash": c["previous_record_hash"], "schema": c["schema"],
            "schema_version": c["schema_version"], "stream": js.get("stream"),
            "stream_sequence": js.get("stream_sequence"), "subject": meta["subject"],
        }
        if digest(alg, canon(rin)) != c["record_hash"]:
            failed.append("record_hash")
        prev = c["previous_record_hash"]
        if prev is not None:
            if prev in by_hash:
                links += 1
            else:
                failed.append("previous_record_hash")
        bad[path] = failed
    for path in paths:
        print(path, "ok" if not bad[path] else "mismatch " + ",".join(bad[path]))
    print("links", links)


if __name__ == "__main__":
    main(sys.argv[1:])
