#!/bin/bash
# A lattice campaign, step 3 of 3: the analysis needs every contraction.
#METAQ AFTER contract.sh
#METAQ NODES 1
#METAQ MIN_WC_TIME 10m
#METAQ PROJECT campaign
out="${CAMPAIGN_DIR:-$PWD}"
echo "start analysis" >> "$out/order.log"
n=$(ls "$out"/contract.* 2>/dev/null | wc -l)
test "$n" -eq 20 || { echo "only $n correlators" >&2; exit 1; }
cat "$out"/contract.* > "$out/analysis.out"
echo "end analysis" >> "$out/order.log"
