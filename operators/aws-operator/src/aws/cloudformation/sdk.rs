//! [`CloudFormation`](super::CloudFormation) on the AWS SDK: the calls, paging, and the mapping of
//! the SDK's errors and change sets to the operator's view.

use std::collections::BTreeMap;

use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_sdk_cloudformation::types::{Capability, Tag};
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_stacks::state::{StackStatus, StackView};
use futures::future::BoxFuture;

use super::{CfnError, ChangeSetView, CloudFormation, StackRequest};

#[derive(Debug, Clone)]
pub struct SdkCloudFormation {
    client: aws_sdk_cloudformation::Client,
}

impl SdkCloudFormation {
    /// CloudFormation through `client`, which carries the account's credentials and region.
    pub fn new(client: aws_sdk_cloudformation::Client) -> Self {
        Self { client }
    }
}

fn cfn_error<E, R>(operation: &'static str, stack: &str, err: aws_sdk_cloudformation::error::SdkError<E, R>) -> CfnError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.as_service_error() {
        Some(e) => {
            let code = e.code().unwrap_or("Unknown").to_string();
            let message = e.message().unwrap_or_default().to_string();
            if message.contains("does not exist") {
                CfnError::NotFound(stack.to_string())
            } else if code == "AlreadyExistsException" {
                CfnError::AlreadyExists(stack.to_string())
            } else if message.contains("No updates are to be performed") {
                CfnError::NoUpdates(stack.to_string())
            } else {
                CfnError::Api { operation, stack: stack.to_string(), code, message }
            }
        }
        None => CfnError::Transport { operation, message: DisplayErrorContext(&err).to_string() },
    }
}

fn view_of(s: &aws_sdk_cloudformation::types::Stack) -> StackView {
    StackView {
        name: s.stack_name().unwrap_or_default().to_string(),
        id: s.stack_id().unwrap_or_default().to_string(),
        status: StackStatus::parse(s.stack_status().map(|s| s.as_str()).unwrap_or("UNKNOWN")),
        status_reason: s.stack_status_reason().map(str::to_string),
        outputs: s
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_string(), o.output_value().unwrap_or_default().to_string())))
            .collect(),
        tags: s.tags().iter().filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string()))).collect(),
        termination_protection: s.enable_termination_protection().unwrap_or(false),
    }
}

fn tags_of(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

impl CloudFormation for SdkCloudFormation {
    fn describe_all(&self) -> BoxFuture<'_, Result<Vec<StackView>, CfnError>> {
        Box::pin(async move {
            let pages = self
                .client
                .describe_stacks()
                .into_paginator()
                .send()
                .try_collect()
                .await
                .map_err(|e| cfn_error("DescribeStacks", "", e))?;
            Ok(pages.iter().flat_map(|p| p.stacks()).map(view_of).collect())
        })
    }

    fn describe(&self, name: &str) -> BoxFuture<'_, Result<Option<StackView>, CfnError>> {
        let name = name.to_string();
        Box::pin(async move {
            match self.client.describe_stacks().stack_name(&name).send().await {
                Ok(out) => Ok(out.stacks().first().map(view_of)),
                Err(e) => match cfn_error("DescribeStacks", &name, e) {
                    CfnError::NotFound(_) => Ok(None),
                    e => Err(e),
                },
            }
        })
    }

    fn create<'a>(&'a self, r: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .create_stack()
                .stack_name(&r.name)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)))
                .enable_termination_protection(r.termination_protection);
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("CreateStack", &r.name, e))
        })
    }

    fn update<'a>(&'a self, r: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .update_stack()
                .stack_name(&r.name)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)));
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("UpdateStack", &r.name, e))
        })
    }

    fn set_termination_protection<'a>(&'a self, name: &'a str, on: bool) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .update_termination_protection()
                .stack_name(name)
                .enable_termination_protection(on)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("UpdateTerminationProtection", name, e))
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .delete_stack()
                .stack_name(name)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("DeleteStack", name, e))
        })
    }

    fn continue_update_rollback<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .continue_update_rollback()
                .stack_name(name)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("ContinueUpdateRollback", name, e))
        })
    }

    fn failed_resources<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<(String, String)>, CfnError>> {
        Box::pin(async move {
            let out = self
                .client
                .describe_stack_resources()
                .stack_name(name)
                .send()
                .await
                .map_err(|e| cfn_error("DescribeStackResources", name, e))?;
            Ok(out
                .stack_resources()
                .iter()
                .filter(|r| r.resource_status().is_some_and(|s| s.as_str() == "DELETE_FAILED"))
                .map(|r| {
                    (
                        r.logical_resource_id().unwrap_or("?").to_string(),
                        r.resource_status_reason().unwrap_or_default().to_string(),
                    )
                })
                .collect())
        })
    }

    fn template<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, CfnError>> {
        Box::pin(async move {
            match self.client.get_template().stack_name(name).send().await {
                Ok(out) => Ok(out.template_body().map(str::to_string)),
                Err(e) => match cfn_error("GetTemplate", name, e) {
                    CfnError::NotFound(_) => Ok(None),
                    e => Err(e),
                },
            }
        })
    }

    fn create_change_set<'a>(
        &'a self,
        r: &'a StackRequest,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .create_change_set()
                .stack_name(&r.name)
                .change_set_name(change_set)
                .change_set_type(aws_sdk_cloudformation::types::ChangeSetType::Update)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)));
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("CreateChangeSet", &r.name, e))
        })
    }

    fn describe_change_set<'a>(
        &'a self,
        stack: &'a str,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<Option<ChangeSetView>, CfnError>> {
        Box::pin(async move {
            let pages = match self
                .client
                .describe_change_set()
                .stack_name(stack)
                .change_set_name(change_set)
                .include_property_values(true)
                .into_paginator()
                .send()
                .try_collect()
                .await
            {
                Ok(pages) => pages,
                Err(e) => {
                    return match cfn_error("DescribeChangeSet", stack, e) {
                        CfnError::NotFound(_) => Ok(None),
                        e => Err(e),
                    };
                }
            };
            // The status is on every page; the changes are spread over them.
            Ok(pages.first().map(|first| ChangeSetView {
                status: first.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                execution_status: first.execution_status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                status_reason: first.status_reason().map(str::to_string),
                changes: pages.iter().flat_map(|p| p.changes()).filter_map(change_of).collect(),
            }))
        })
    }

    fn execute_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .execute_change_set()
                .stack_name(stack)
                .change_set_name(change_set)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("ExecuteChangeSet", stack, e))
        })
    }

    fn change_sets<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<Vec<String>, CfnError>> {
        Box::pin(async move {
            let pages =
                match self.client.list_change_sets().stack_name(stack).into_paginator().send().try_collect().await {
                    Ok(pages) => pages,
                    Err(e) => {
                        return match cfn_error("ListChangeSets", stack, e) {
                            CfnError::NotFound(_) => Ok(Vec::new()),
                            e => Err(e),
                        };
                    }
                };
            // Filtered here too: an emulator may list other stacks' change sets.
            Ok(pages
                .iter()
                .flat_map(|p| p.summaries())
                .filter(|c| c.stack_name().is_none_or(|n| n == stack))
                .filter_map(|c| c.change_set_name().map(str::to_string))
                .collect())
        })
    }

    fn delete_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            match self.client.delete_change_set().stack_name(stack).change_set_name(change_set).send().await {
                Ok(_) => Ok(()),
                Err(e) => match cfn_error("DeleteChangeSet", stack, e) {
                    CfnError::NotFound(_) => Ok(()),
                    e => Err(e),
                },
            }
        })
    }
}

pub(super) fn change_of(c: &aws_sdk_cloudformation::types::Change) -> Option<crate::approval::ChangeSetChange> {
    let r = c.resource_change()?;
    Some(crate::approval::ChangeSetChange {
        action: r.action().map(|a| a.as_str().to_string()).unwrap_or_default(),
        logical_id: r.logical_resource_id().unwrap_or_default().to_string(),
        resource_type: r.resource_type().unwrap_or_default().to_string(),
        replacement: r.replacement().map(|x| x.as_str().to_string()),
        paths: r
            .details()
            .iter()
            .filter_map(|d| {
                let t = d.target()?;
                // `Properties.<path>` as the template diff writes it: the property path
                // (`/LaunchTemplateData/ImageId`, with IncludePropertyValues) or else its name.
                let attribute = t.attribute().map(|a| a.as_str().to_string()).unwrap_or_default();
                let raw = t.path().or(t.name()).unwrap_or_default().trim_start_matches('/');
                // The path may or may not start with the attribute (`/Properties/…`).
                let raw = raw.strip_prefix(&format!("{attribute}/")).unwrap_or(raw);
                let path = raw.replace('/', ".");
                Some(if path.is_empty() { attribute } else { format!("{attribute}.{path}") })
            })
            .collect(),
    })
}
