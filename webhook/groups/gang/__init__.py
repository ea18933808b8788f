"""Native gangs (scheduling.k8s.io/v1alpha2 PodGroup) and the watch on partly bound groups."""
