#!/bin/bash
# The smallest task: one node, a minute of wall clock.
#METAQ NODES 1
#METAQ MIN_WC_TIME 00:01:00
#METAQ PROJECT examples

echo "hello from $(hostname) at $(date)"
env | grep '^METAQ_' | sort
sleep 1
