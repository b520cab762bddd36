"""How long a replica takes to load N subscriptions from the state topic at start-up.

    python3 Benchmarks/state-load.py 100000 .build/debug/push-gateway

Starts a Tansu broker, writes N state records (one subscription each, ~150-byte tokens), starts the gateway
and reports the time until /readyz and the gateway's own "subscriptions loaded" log line."""
import json, os, subprocess, sys, time, socket, urllib.request
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import tempfile
WORK = tempfile.mkdtemp(prefix="state-load-")
from kafka_util import Tansu, Topics
from confluent_kafka import Producer
import yaml

N = int(sys.argv[1])
binary = sys.argv[2]
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
broker = Tansu(WORK).start()
try:
    t = Topics.unique(broker)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.num.messages": 10000})
    start = time.time()
    for i in range(N):
        key = json.dumps(["demo", f"/users/u{i}", "mobile", f"fcm-{i:x}:APA91b" + "x" * 140, ""], separators=(",", ":"))
        p.produce(t.state, key=key, value=b'{"expiresAt":1900000000,"format":"v1","mode":"noData"}')
        if i % 10000 == 0: p.poll(0)
    p.flush(120)
    print(f"produced {N} state records in {time.time()-start:.1f}s")
    port = free_port()
    cfg = {"http": {"port": port}, "kafka": {"brokers": broker.bootstrap, "groupId": t.group, "changesTopic": t.changes,
           "deadLetterTopic": t.dlq, "stateTopic": t.state,
           "properties": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}}, "apps": {"demo": {}}}
    open(WORK + "/cfg.yaml", "w").write(yaml.safe_dump(cfg))
    start = time.time()
    gw = subprocess.Popen([binary, "run", "--config", WORK + "/cfg.yaml"], stdout=subprocess.DEVNULL, stderr=open(WORK + "/gw.err", "w"))
    try:
        while time.time() - start < 300:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200: break
            except Exception: pass
            time.sleep(0.1)
        print(f"ready after {time.time()-start:.1f}s")
        print([l for l in open(WORK + "/gw.err") if "loaded" in l][-1].strip()[:300])
    finally:
        gw.terminate(); gw.wait(20)
finally:
    broker.stop()
