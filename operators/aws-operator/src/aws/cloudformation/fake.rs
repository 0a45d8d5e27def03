//! [`FakeCloudFormation`]: an in-memory CloudFormation for tests.

use std::collections::BTreeMap;

use aws_stacks::state::{StackStatus, StackView};
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::{CfnError, ChangeSetView, CloudFormation, StackRequest};

/// How many stacks one page of the fake's listing holds (each page counts as one
/// `DescribeStacks` call).
pub const FAKE_PAGE_SIZE: usize = 100;

/// An in-memory CloudFormation for tests of the state machine and of resources: it keeps stacks
/// in a map, lets a test force any status (including the ones moto cannot produce), and counts
/// calls (a listing counts one call per page of [`FAKE_PAGE_SIZE`] stacks).
#[derive(Debug, Default)]
pub struct FakeCloudFormation {
    state: Mutex<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    stacks: BTreeMap<String, (StackView, StackRequest)>,
    calls: BTreeMap<&'static str, usize>,
    fail_next: Vec<(&'static str, CfnErrorSpec)>,
    failed_resources: BTreeMap<String, Vec<(String, String)>>,
    /// Outputs and request before the last update, for [`FakeCloudFormation::roll_back`].
    before_update: BTreeMap<String, (BTreeMap<String, String>, StackRequest)>,
    hold_deletes: bool,
    /// Change sets by (stack, name): the request they would apply and how they look.
    change_sets: BTreeMap<(String, String), (StackRequest, ChangeSetView)>,
}

/// An error a [`FakeCloudFormation`] returns for the next call of an operation.
#[derive(Clone, Debug)]
pub struct CfnErrorSpec {
    /// The AWS error code.
    pub code: String,
    /// The message.
    pub message: String,
}

impl FakeCloudFormation {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Force a stack's status (and reason).
    pub fn set_status(&self, name: &str, status: &str, reason: Option<&str>) {
        if let Some((view, _)) = self.state.lock().stacks.get_mut(name) {
            view.status = StackStatus::parse(status);
            view.status_reason = reason.map(str::to_string);
        }
    }

    /// Undo the last update of `name` as CloudFormation's rollback does: the outputs and
    /// template of before come back (set the status with [`FakeCloudFormation::set_status`]).
    pub fn roll_back(&self, name: &str) {
        let mut s = self.state.lock();
        if let Some((outputs, request)) = s.before_update.remove(name)
            && let Some((view, req)) = s.stacks.get_mut(name)
        {
            view.outputs = outputs;
            *req = request;
        }
    }

    /// While `on`, a delete leaves the stack in `DELETE_IN_PROGRESS` instead of removing it,
    /// so that a test can fail it with [`FakeCloudFormation::set_status`].
    pub fn hold_deletes(&self, on: bool) {
        self.state.lock().hold_deletes = on;
    }

    /// Record resources whose deletion failed.
    pub fn set_failed_resources(&self, name: &str, resources: Vec<(String, String)>) {
        self.state.lock().failed_resources.insert(name.to_string(), resources);
    }

    /// Make the next call of `operation` fail.
    pub fn fail_next(&self, operation: &'static str, code: &str, message: &str) {
        self.state.lock().fail_next.push((operation, CfnErrorSpec { code: code.into(), message: message.into() }));
    }

    /// How many times `operation` was called.
    pub fn calls(&self, operation: &str) -> usize {
        self.state.lock().calls.get(operation).copied().unwrap_or(0)
    }

    /// The stack as stored.
    pub fn stack(&self, name: &str) -> Option<StackView> {
        self.state.lock().stacks.get(name).map(|(v, _)| v.clone())
    }

    /// The last request that created or updated `name`.
    pub fn request(&self, name: &str) -> Option<StackRequest> {
        self.state.lock().stacks.get(name).map(|(_, r)| r.clone())
    }

    fn begin(&self, operation: &'static str, stack: &str) -> Result<(), CfnError> {
        let mut s = self.state.lock();
        *s.calls.entry(operation).or_default() += 1;
        if let Some(i) = s.fail_next.iter().position(|(op, _)| *op == operation) {
            let (_, spec) = s.fail_next.remove(i);
            return Err(CfnError::Api { operation, stack: stack.to_string(), code: spec.code, message: spec.message });
        }
        Ok(())
    }

    fn outputs_of(request: &StackRequest) -> BTreeMap<String, String> {
        // The fake reads literal output values from the template, which is what the operator's
        // own templates use for their version and hash outputs.
        let body = request.template_body.as_deref().unwrap_or("{}");
        let mut out = BTreeMap::new();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(body)
            && let Some(outputs) = v.get("Outputs").and_then(|o| o.as_object())
        {
            for (k, o) in outputs {
                if let Some(s) = o.get("Value").and_then(|v| v.as_str()) {
                    out.insert(k.clone(), s.to_string());
                }
            }
        }
        out
    }
}

impl CloudFormation for FakeCloudFormation {
    fn describe_all(&self) -> BoxFuture<'_, Result<Vec<StackView>, CfnError>> {
        Box::pin(async move {
            // One call per page of [`FAKE_PAGE_SIZE`] stacks, as a paginated listing costs.
            let pages = self.state.lock().stacks.len().div_ceil(FAKE_PAGE_SIZE).max(1);
            for _ in 0..pages {
                self.begin("DescribeStacks", "")?;
            }
            Ok(self.state.lock().stacks.values().map(|(v, _)| v.clone()).collect())
        })
    }

    fn describe(&self, name: &str) -> BoxFuture<'_, Result<Option<StackView>, CfnError>> {
        let name = name.to_string();
        Box::pin(async move {
            self.begin("DescribeStacks", &name)?;
            Ok(self.stack(&name))
        })
    }

    fn create<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("CreateStack", &request.name)?;
            let mut s = self.state.lock();
            if s.stacks.contains_key(&request.name) {
                return Err(CfnError::AlreadyExists(request.name.clone()));
            }
            let view = StackView {
                name: request.name.clone(),
                id: format!("arn:aws:cloudformation:fake:000000000000:stack/{}/1", request.name),
                status: StackStatus::CreateComplete,
                status_reason: None,
                outputs: Self::outputs_of(request),
                tags: request.tags.clone(),
                termination_protection: request.termination_protection,
            };
            s.stacks.insert(request.name.clone(), (view, request.clone()));
            Ok(())
        })
    }

    fn update<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("UpdateStack", &request.name)?;
            let mut s = self.state.lock();
            let Some((view, req)) = s.stacks.get_mut(&request.name) else {
                return Err(CfnError::NotFound(request.name.clone()));
            };
            if req.template_body == request.template_body && req.tags == request.tags {
                return Err(CfnError::NoUpdates(request.name.clone()));
            }
            let before = (view.outputs.clone(), req.clone());
            view.status = StackStatus::UpdateComplete;
            view.outputs = Self::outputs_of(request);
            view.tags = request.tags.clone();
            *req = request.clone();
            s.before_update.insert(request.name.clone(), before);
            Ok(())
        })
    }

    fn set_termination_protection<'a>(&'a self, name: &'a str, on: bool) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("UpdateTerminationProtection", name)?;
            match self.state.lock().stacks.get_mut(name) {
                Some((view, _)) => {
                    view.termination_protection = on;
                    Ok(())
                }
                None => Err(CfnError::NotFound(name.to_string())),
            }
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("DeleteStack", name)?;
            let mut s = self.state.lock();
            if let Some((view, _)) = s.stacks.get(name)
                && view.termination_protection
            {
                return Err(CfnError::Api {
                    operation: "DeleteStack",
                    stack: name.to_string(),
                    code: "ValidationError".into(),
                    message: format!("Stack [{name}] cannot be deleted while TerminationProtection is enabled"),
                });
            }
            if s.hold_deletes {
                if let Some((view, _)) = s.stacks.get_mut(name) {
                    view.status = StackStatus::InProgress("DELETE_IN_PROGRESS".into());
                }
            } else {
                s.stacks.remove(name);
            }
            Ok(())
        })
    }

    fn continue_update_rollback<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("ContinueUpdateRollback", name)?;
            match self.state.lock().stacks.get_mut(name) {
                Some((view, _)) => {
                    view.status = StackStatus::UpdateRollbackComplete;
                    Ok(())
                }
                None => Err(CfnError::NotFound(name.to_string())),
            }
        })
    }

    fn failed_resources<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<(String, String)>, CfnError>> {
        Box::pin(async move {
            self.begin("DescribeStackResources", name)?;
            Ok(self.state.lock().failed_resources.get(name).cloned().unwrap_or_default())
        })
    }

    fn template<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, CfnError>> {
        Box::pin(async move {
            self.begin("GetTemplate", name)?;
            Ok(self.state.lock().stacks.get(name).map(|(_, r)| r.template_body.clone().unwrap_or_default()))
        })
    }

    fn create_change_set<'a>(
        &'a self,
        r: &'a StackRequest,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("CreateChangeSet", &r.name)?;
            let mut s = self.state.lock();
            let Some((_, deployed)) = s.stacks.get(&r.name) else {
                return Err(CfnError::NotFound(r.name.clone()));
            };
            let parse = |b: &Option<String>| {
                serde_json::from_str::<serde_json::Value>(b.as_deref().unwrap_or("{}")).unwrap_or_default()
            };
            // The fake's own account of the change: the template diff, without CloudFormation's
            // replacement verdicts.
            let changes = crate::approval::template_diff(&parse(&deployed.template_body), &parse(&r.template_body))
                .into_iter()
                .map(|c| crate::approval::ChangeSetChange {
                    action: format!("{:?}", c.action),
                    logical_id: c.logical_id,
                    resource_type: c.resource_type,
                    replacement: None,
                    paths: c.paths,
                })
                .collect();
            let view = ChangeSetView {
                status: "CREATE_COMPLETE".into(),
                execution_status: "AVAILABLE".into(),
                status_reason: None,
                changes,
            };
            s.change_sets.insert((r.name.clone(), change_set.to_string()), (r.clone(), view));
            Ok(())
        })
    }

    fn describe_change_set<'a>(
        &'a self,
        stack: &'a str,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<Option<ChangeSetView>, CfnError>> {
        Box::pin(async move {
            self.begin("DescribeChangeSet", stack)?;
            Ok(self.state.lock().change_sets.get(&(stack.to_string(), change_set.to_string())).map(|(_, v)| v.clone()))
        })
    }

    fn execute_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("ExecuteChangeSet", stack)?;
            let request = {
                let mut s = self.state.lock();
                let Some((request, _)) = s.change_sets.get(&(stack.to_string(), change_set.to_string())).cloned()
                else {
                    return Err(CfnError::NotFound(stack.to_string()));
                };
                // As CloudFormation: executing one change set removes the stack's others.
                s.change_sets.retain(|(st, _), _| st != stack);
                request
            };
            self.update(&request).await
        })
    }

    fn change_sets<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<Vec<String>, CfnError>> {
        Box::pin(async move {
            self.begin("ListChangeSets", stack)?;
            Ok(self.state.lock().change_sets.keys().filter(|(s, _)| s == stack).map(|(_, n)| n.clone()).collect())
        })
    }

    fn delete_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("DeleteChangeSet", stack)?;
            self.state.lock().change_sets.remove(&(stack.to_string(), change_set.to_string()));
            Ok(())
        })
    }
}
