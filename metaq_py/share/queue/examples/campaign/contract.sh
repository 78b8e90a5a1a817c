#!/bin/bash
# A lattice campaign, step 2 of 3: the contractions of a configuration need its propagator,
# so index i waits for index i of prop.sh ({index} is the task's own index).
#METAQ ARRAY 0-19
#METAQ AFTER prop.sh[{index}]
#METAQ NODES 1
#METAQ MIN_WC_TIME 10m
#METAQ PROJECT campaign
out="${CAMPAIGN_DIR:-$PWD}"
cfg="$METAQ_ARRAY_INDEX"
echo "start contract $cfg" >> "$out/order.log"
test -s "$out/prop.$cfg" || { echo "no propagator for $cfg" >&2; exit 1; }
sleep "${CAMPAIGN_SLEEP:-0.2}"
echo "correlator of configuration $cfg" > "$out/contract.$cfg"
echo "end contract $cfg" >> "$out/order.log"
