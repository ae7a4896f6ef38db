# Sourced by the rxe VM benchmarks (perf_vs_perftest.sh, coll_vs_perftest.sh).
#
# qemu's `-netdev socket,udp=...` receive socket gets the host's
# net.core.rmem_default (212992 bytes here: about 23 jumbo frames). A TCG VM
# that falls behind a burst loses frames in that socket; rxe then waits out
# its retransmission timeouts, and both tools measure those timeouts rather
# than themselves (completer_retry_err, duplicate_request, out_of_seq_request
# in the counters the benchmarks print). For the run, raise the default to
# QEMU_RMEM bytes (default 4194304; QEMU_RMEM=0 keeps the host's value) and
# put the old value back on exit. Needs root; otherwise it says so and the
# run goes on with the host's value.
QEMU_RMEM=${QEMU_RMEM:-4194304}
QEMU_RMEM_OLD=""
RMEM_FILE=/proc/sys/net/core/rmem_default

bench_raise_qemu_rmem() {
  [ "$QEMU_RMEM" = 0 ] && { echo "qemu socket buffers: host default $(cat $RMEM_FILE) bytes (QEMU_RMEM=0)"; return 0; }
  local old
  old=$(cat "$RMEM_FILE")
  if [ "$old" -ge "$QEMU_RMEM" ]; then
    echo "qemu socket buffers: host default $old bytes"
  elif echo "$QEMU_RMEM" 2>/dev/null > "$RMEM_FILE"; then
    QEMU_RMEM_OLD=$old
    echo "qemu socket buffers: net.core.rmem_default $old -> $QEMU_RMEM bytes for this run"
  else
    echo "qemu socket buffers: cannot raise net.core.rmem_default from $old (not root?);" \
      "expect frame loss and retransmissions in the VMs" >&2
  fi
}

bench_restore_qemu_rmem() {
  if [ -n "$QEMU_RMEM_OLD" ]; then
    echo "$QEMU_RMEM_OLD" > "$RMEM_FILE" || echo "could not restore net.core.rmem_default to $QEMU_RMEM_OLD" >&2
    QEMU_RMEM_OLD=""
  fi
}
