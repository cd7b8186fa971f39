output "cluster_arn" {
  value = sluice_cluster.events.arn
}

output "configuration_arn" {
  value = sluice_configuration.events.arn
}

output "bootstrap_brokers_sasl_scram" {
  description = "SASL_SSL (SCRAM-SHA-512) bootstrap string of the cluster."
  value       = sluice_cluster.events.bootstrap_brokers_sasl_scram
}

output "private_endpoint_bootstrap_brokers" {
  description = "The application's bootstrap string: its private endpoint (SASL_SSL, SCRAM)."
  value       = sluice_private_endpoint.app.bootstrap_brokers
}

output "app_user" {
  value = sluice_user.app.name
}

output "topic" {
  value = sluice_topic.orders.name
}
