"""Fleet: what the webhook knows of the cluster, fed by watches (statuses -> layouts -> cache)."""
