"""Native gangs (scheduling.k8s.io PodGroup, the version served) and the partly-bound watch."""
