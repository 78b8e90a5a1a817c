#!/bin/bash
# A lattice campaign, step 1 of 3: one propagator per configuration, as a task array.
#     metaq submit prop.sh contract.sh analysis.sh     (from this folder, in one command)
#METAQ ARRAY 0-19
#METAQ NODES 1
#METAQ MIN_WC_TIME 10m
#METAQ PROJECT campaign
out="${CAMPAIGN_DIR:-$PWD}"
cfg="$METAQ_ARRAY_INDEX"
echo "start prop $cfg" >> "$out/order.log"
sleep "${CAMPAIGN_SLEEP:-0.2}"
echo "propagator of configuration $cfg" > "$out/prop.$cfg"
echo "end prop $cfg" >> "$out/order.log"
