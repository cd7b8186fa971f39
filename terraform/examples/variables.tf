variable "cluster_name" {
  type        = string
  description = "Name of the cluster (1-64 letters, digits and hyphens)."
  default     = "events"
}

variable "broker_count" {
  type        = number
  description = "Number of brokers."
  default     = 3
}

variable "environment" {
  type        = string
  description = "The cluster's env tag."
  default     = "test"
}

variable "app_password" {
  type        = string
  description = "SCRAM password of the application user (give it as TF_VAR_app_password)."
  sensitive   = true
}
