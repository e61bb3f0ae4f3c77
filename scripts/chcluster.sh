#!/usr/bin/env bash
# A ClickHouse cluster on this machine for the cluster store's tests
# (store/clickhouse TestCluster*): two more ClickHouse servers (the
# installed clickhouse-server, Debian's 18.16) as the two shards, one
# replica each, of the cluster "stormradius_test", and a ZooKeeper
# (Debian's zookeeper package, 3.8) as the coordination service of their
# Replicated tables and ON CLUSTER DDL. Everything lives under one
# directory (data, configs, logs, pids); nothing of the system's own
# ClickHouse server is touched.
#
#   scripts/chcluster.sh start   # prints the DSN line for the tests:
#                                # STORMRADIUS_TEST_CLICKHOUSE_CLUSTER=clickhouse://127.0.0.1:29001/default?cluster=stormradius_test
#   scripts/chcluster.sh stop    # stops what start started, removes the directory
#   scripts/chcluster.sh status
#
# CHCLUSTER_DIR (default /tmp/stormradius-chcluster) and CHCLUSTER_PORT
# (default 29000) move it: ZooKeeper listens on PORT+181, shard N's server
# on PORT+N (native), PORT+120+N (HTTP) and PORT+10+N (replication).
# start is idempotent: a cluster already answering is left as it is.
# Run as root, the servers run as the clickhouse user (runuser).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DIR=${CHCLUSTER_DIR:-/tmp/stormradius-chcluster}
BASE=${CHCLUSTER_PORT:-29000}
CLUSTER=stormradius_test
ZK_PORT=$((BASE + 181))
SHARDS=(1 2)

tcp_port() { echo $((BASE + $1)); }
http_port() { echo $((BASE + 120 + $1)); }
interserver_port() { echo $((BASE + 10 + $1)); }

dsn() { echo "clickhouse://127.0.0.1:$(tcp_port 1)/default?cluster=$CLUSTER"; }

# zk_ok: ZooKeeper answers its "ruok" four-letter word.
zk_ok() {
	local r
	r=$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ZK_PORT && printf ruok >&3 && cat <&3" 2>/dev/null) || return 1
	[ "$r" = imok ]
}

# ch_ok N: shard N's server answers a query that needs ZooKeeper.
ch_ok() {
	clickhouse-client --port "$(tcp_port "$1")" -q "SELECT count() FROM system.zookeeper WHERE path = '/'" >/dev/null 2>&1
}

# as_clickhouse CMD...: runs CMD as the clickhouse user when root.
as_clickhouse() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u clickhouse -- "$@"
	else
		"$@"
	fi
}

start_zookeeper() {
	zk_ok && return 0
	if [ ! -f /usr/share/java/zookeeper.jar ]; then
		echo "chcluster: no /usr/share/java/zookeeper.jar: apt-get install -y zookeeper" >&2
		exit 1
	fi
	mkdir -p "$DIR/zookeeper/data"
	cat >"$DIR/zookeeper/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$DIR/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=200
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
# A test service: no fsync per write (DDL on a cluster writes ZooKeeper a lot).
forceSync=no
EOF
	# The jar's manifest names its dependencies; slf4j-simple logs to the
	# log file (warnings only).
	nohup java -Xms64m -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
		-Dzookeeper.admin.enableServer=false \
		-cp "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zookeeper/zoo.cfg" \
		>"$DIR/zookeeper/zookeeper.log" 2>&1 </dev/null &
	echo $! >"$DIR/zookeeper/pid"
	for _ in $(seq 60); do
		zk_ok && return 0
		sleep 0.5
	done
	echo "chcluster: ZooKeeper did not answer on 127.0.0.1:$ZK_PORT in 30 s:" >&2
	tail -20 "$DIR/zookeeper/zookeeper.log" >&2
	exit 1
}

# config N: shard N's server configuration: a small config.xml of its own
# (ports, paths under DIR) and, in config.d, the cluster, ZooKeeper and
# its macros.
config() {
	local n=$1 d="$DIR/shard$1"
	mkdir -p "$d/config.d" "$d/data/tmp" "$d/data/user_files" "$d/log"
	cat >"$d/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>$d/log/clickhouse-server.log</log>
        <errorlog>$d/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>$(tcp_port "$n")</tcp_port>
    <http_port>$(http_port "$n")</http_port>
    <interserver_http_port>$(interserver_port "$n")</interserver_http_port>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <max_connections>512</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <mark_cache_size>67108864</mark_cache_size>
    <path>$d/data/</path>
    <tmp_path>$d/data/tmp/</tmp_path>
    <user_files_path>$d/data/user_files/</user_files_path>
    <users_config>/etc/clickhouse-server/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mlock_executable>false</mlock_executable>
    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
EOF
	{
		echo '<?xml version="1.0"?>'
		echo '<yandex>'
		echo "    <remote_servers>"
		echo "        <$CLUSTER>"
		for s in "${SHARDS[@]}"; do
			echo "            <shard><internal_replication>true</internal_replication>"
			echo "                <replica><host>127.0.0.1</host><port>$(tcp_port "$s")</port></replica>"
			echo "            </shard>"
		done
		echo "        </$CLUSTER>"
		echo "    </remote_servers>"
		echo "    <zookeeper><node><host>127.0.0.1</host><port>$ZK_PORT</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>"
		echo "    <macros><shard>$n</shard><replica>replica1</replica></macros>"
		echo '</yandex>'
	} >"$d/config.d/cluster.xml"
}

start_shard() {
	local n=$1 d="$DIR/shard$1"
	ch_ok "$n" && return 0
	config "$n"
	if [ "$(id -u)" = 0 ]; then
		chown -R clickhouse:clickhouse "$d"
	fi
	(cd "$d/data" && as_clickhouse clickhouse-server --config-file="$d/config.xml" --daemon \
		--pid-file="$d/clickhouse-server.pid")
}

start() {
	mkdir -p "$DIR"
	chmod 755 "$DIR"
	start_zookeeper
	for n in "${SHARDS[@]}"; do start_shard "$n"; done
	for n in "${SHARDS[@]}"; do
		for _ in $(seq 120); do
			ch_ok "$n" && break
			sleep 0.5
		done
		if ! ch_ok "$n"; then
			echo "chcluster: shard $n's server did not answer on 127.0.0.1:$(tcp_port "$n") in 60 s:" >&2
			tail -20 "$DIR/shard$n/log/clickhouse-server.err.log" >&2 || true
			exit 1
		fi
	done
	echo "STORMRADIUS_TEST_CLICKHOUSE_CLUSTER=$(dsn)"
}

stop() {
	for n in "${SHARDS[@]}"; do stop_pid "$DIR/shard$n/clickhouse-server.pid"; done
	stop_pid "$DIR/zookeeper/pid"
	rm -rf "$DIR"
}

status() {
	local ok=0
	if zk_ok; then echo "zookeeper 127.0.0.1:$ZK_PORT up"; else echo "zookeeper 127.0.0.1:$ZK_PORT down"; ok=1; fi
	for n in "${SHARDS[@]}"; do
		if ch_ok "$n"; then echo "shard $n 127.0.0.1:$(tcp_port "$n") up"; else echo "shard $n 127.0.0.1:$(tcp_port "$n") down"; ok=1; fi
	done
	[ $ok = 0 ] && echo "STORMRADIUS_TEST_CLICKHOUSE_CLUSTER=$(dsn)"
	return $ok
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
