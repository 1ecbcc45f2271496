#!/bin/bash
# run-bodies.sh BIN PORT: starts BIN serve --stage 1 on 127.0.0.1:PORT, posts 16
# concurrent /v1/run bodies of 45.8 MB (just under the default limit; forged,
# so each is refused once read and decoded) and prints the server's RSS before,
# at its peak and after, and the answers' statuses. Loopback only; ~1 GB of
# client memory while it runs.
set -u
python3 -c "import sys; open(\"/tmp/run-bodies.json\",\"wb\").write(b'{\"stage_id\":1,\"stage_input\":\"' + b\"A\"*(45787819-200) + b'\"}')"
BIN=$1; PORT=$2
$BIN serve --stage 1 --addr 127.0.0.1:$PORT 2>/tmp/bb-$PORT.log &
PID=$!
for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$PORT/ready && break; sleep 0.2; done
sleep 1
base=$(grep VmRSS /proc/$PID/status | awk '{print $2}')
start=$(date +%s.%N)
for i in $(seq 16); do curl -s -o /tmp/bb-out-$i -w "%{http_code}\n" -H 'Content-Type: application/json' --data-binary @/tmp/run-bodies.json http://127.0.0.1:$PORT/v1/run & done > /tmp/bb-codes-$PORT.txt
wait $(jobs -p | grep -v $PID) 2>/dev/null
sleep 0.5
end=$(date +%s.%N)
hwm=$(grep VmHWM /proc/$PID/status | awk '{print $2}')
rss=$(grep VmRSS /proc/$PID/status | awk '{print $2}')
echo "$BIN: base RSS ${base} kB, peak ${hwm} kB, after ${rss} kB; codes: $(sort /tmp/bb-codes-$PORT.txt | uniq -c | tr '\n' ' '); $(head -c 200 /tmp/bb-out-1)"
kill $PID; wait $PID 2>/dev/null
