# A Sluice cluster as a platform team would write it: broker settings in a configuration (as
# aws_msk_configuration), three tagged brokers that use its latest revision, clients by SCRAM
# (and a plaintext listener for tools inside the network), a tiered topic, an application user
# with the ACLs it needs, and a private endpoint that only that user may use.
#
#   cloudctl terraform-config > ~/.sluice.tfrc                        # dev_overrides to this venv
#   export TF_CLI_CONFIG_FILE=~/.sluice.tfrc TF_VAR_app_password=...   # never in a file
#   terraform plan && terraform apply
#   terraform output -raw private_endpoint_bootstrap_brokers
#
# The provider finds the control plane as cloudctl does (SLUICE_ENDPOINT, SLUICE_HOME);
# `terraform/README.md` lists every argument.

terraform {
  required_providers {
    sluice = {
      source = "sluice/sluice"
    }
  }
}

provider "sluice" {}

# A change of these settings makes the next revision; the cluster moves to it in place (a
# rolling restart), since it follows latest_revision.
resource "sluice_configuration" "events" {
  name              = "${var.cluster_name}-brokers"
  description       = "Topics made on purpose, kept a week."
  server_properties = <<PROPERTIES
auto.create.topics.enable = false
log.retention.ms = 604800000
PROPERTIES
}

resource "sluice_cluster" "events" {
  name                  = var.cluster_name
  broker_count          = var.broker_count
  broker_type           = "kafka.m7g.large"
  storage_mode          = "TIERED"
  client_authentication = ["scram", "none"]
  tags = {
    team = "orders"
    env  = var.environment
  }

  configuration_info {
    arn      = sluice_configuration.events.arn
    revision = sluice_configuration.events.latest_revision
  }

  timeouts {
    create = "20m"
  }
}

# Tiered: segments older than an hour live only in the object store; reads reach them there.
resource "sluice_topic" "orders" {
  cluster    = sluice_cluster.events.name
  name       = "orders"
  partitions = 6
  config = {
    "remote.storage.enable" = "true"
    "local.retention.ms"    = "3600000"
    "retention.ms"          = "2592000000"
  }
}

resource "sluice_user" "app" {
  cluster  = sluice_cluster.events.name
  name     = "orders-app"
  password = var.app_password
}

resource "sluice_acl" "app" {
  for_each = {
    write-orders = { type = "TOPIC", name = "orders", operation = "WRITE" }
    read-orders  = { type = "TOPIC", name = "orders", operation = "READ" }
    read-groups  = { type = "GROUP", name = "orders-", operation = "READ" }
  }

  cluster               = sluice_cluster.events.name
  resource_type         = each.value.type
  resource_name         = each.value.name
  resource_pattern_type = each.value.type == "GROUP" ? "PREFIXED" : "LITERAL"
  principal             = "User:${sluice_user.app.name}"
  operation             = each.value.operation
  depends_on            = [sluice_topic.orders]
}

resource "sluice_private_endpoint" "app" {
  cluster               = sluice_cluster.events.name
  name                  = "orders-app"
  client_authentication = "scram"
  allowed_principals    = ["User:${sluice_user.app.name}"]
}
