import * as React from 'react';
import { Link, useParams } from 'react-router';
import { Alert, Button, Checkbox, PageSection, Progress, Title } from '@patternfly/react-core';
import { consoleFetchJSON } from '@openshift-console/dynamic-plugin-sdk';
import { API, LoadError } from './api';
import { Cell, Loading, Table, useLVMSTranslation } from './common';

type WizardStep = { action: string; title: string; available: boolean; enabled: boolean; why: string; missing: string[] };
type ProgressEvent = { step: string; node?: string; done: number; total: number; message: string };
type Check = { name: string; verdict: string; reason: string; fix?: string; details?: string[] };
type Run = {
  action: string; state: 'running' | 'passed' | 'failed'; by?: string; error?: string; events: ProgressEvent[];
  latest?: ProgressEvent; checks?: Check[]; verify?: { differences: string[] };
};
type Migration = {
  namespace: string; cluster: string; clusterGone: boolean; done: boolean; step?: string; planText?: string;
  planError?: string; lossy: number; nodes: { name: string; state: string }[]; steps: WizardStep[]; run?: Run; csrf: string;
};

const statusOf = (err: any): number | undefined => err?.response?.status ?? err?.status;

// MigrationPage (/lvms/migration/:ns/:cluster): the guided move of an LVMCluster to LVMNodeSets. Every step is
// taken as the logged-in user (the console's proxy adds the user's token); a step the user may not take is
// disabled with the permissions they lack.
const MigrationPage: React.FC = () => {
  const { t } = useLVMSTranslation();
  const ns = useParams().ns ?? '';
  const cluster = useParams().cluster ?? '';
  const path = `${API}/migration/${encodeURIComponent(ns)}/${encodeURIComponent(cluster)}`;
  const [state, setState] = React.useState<{ data?: Migration; error?: LoadError; loading: boolean }>({ loading: true });
  const [tick, setTick] = React.useState(0);
  const [acceptLossy, setAcceptLossy] = React.useState(false);
  const [postError, setPostError] = React.useState<string>();

  React.useEffect(() => {
    let live = true;
    consoleFetchJSON(path)
      .then((data: Migration) => live && setState({ data, loading: false }))
      .catch((err: any) => live && setState({ error: { status: statusOf(err), message: String(err?.message ?? err) }, loading: false }));
    return () => {
      live = false;
    };
  }, [path, tick]);

  const running = state.data?.run?.state === 'running';
  React.useEffect(() => {
    if (!running) {
      return undefined;
    }
    const id = setInterval(() => setTick((n) => n + 1), 2000);
    return () => clearInterval(id);
  }, [running]);

  const take = (action: string) => {
    setPostError(undefined);
    (consoleFetchJSON as any)
      .post(`${path}/${action}`, { acceptLossy }, { headers: { 'X-LVMS-CSRF': state.data?.csrf ?? '' } })
      .then(() => setTick((n) => n + 1))
      .catch((err: any) => setPostError(String(err?.message ?? err)));
  };

  return (
    <PageSection>
      <Link to="/lvms">{t('LVM Storage')}</Link>
      <Title headingLevel="h1">{t('Migrate LVMCluster {{cluster}}', { cluster })}</Title>
      <Loading loading={state.loading && !state.data} error={state.error} what={t('the migration of {{cluster}}', { cluster })}>
        {() => {
          const m = state.data!;
          return (
            <>
              <p data-test="migration-status">
                {m.done
                  ? t('Finished: the LVMNodeSets manage the storage; the LVMCluster was removed without touching its disks.')
                  : m.step
                    ? t('Under way at step {{step}}.', { step: m.step })
                    : t('Not started. Nothing has been written.')}
              </p>
              {postError && (
                <Alert variant="danger" isInline title={t('The step did not start')} data-test="post-error">
                  {postError}
                </Alert>
              )}
              {m.lossy > 0 && (
                <Checkbox
                  id="accept-lossy"
                  data-test="accept-lossy"
                  isChecked={acceptLossy}
                  onChange={(_e, v) => setAcceptLossy(v)}
                  label={t('I have read the {{n}} mapping(s) marked Lossy in the plan and accept them', { n: m.lossy })}
                />
              )}
              <Table label={t('Steps')} head={[t('Step'), t('State'), '']}>
                {m.steps.map((s) => (
                  <tr className="pf-v6-c-table__tr" key={s.action} data-step={s.action} data-enabled={String(s.enabled)}>
                    <Cell label={t('Step')}>{s.title}</Cell>
                    <Cell label={t('State')}>
                      <div data-test="step-why">{s.why}</div>
                      {s.missing.length > 0 && (
                        <ul data-test="missing-permissions">
                          {s.missing.map((p) => (
                            <li key={p} data-test="missing-permission">
                              {t('You lack: {{p}}', { p })}
                            </li>
                          ))}
                        </ul>
                      )}
                    </Cell>
                    <Cell label="">
                      {s.action !== 'plan' && (
                        <Button variant="secondary" data-test="step-button" isDisabled={!s.enabled || running} onClick={() => take(s.action)}>
                          {s.title}
                        </Button>
                      )}
                    </Cell>
                  </tr>
                ))}
              </Table>
              {m.nodes.length > 0 && (
                <Table label={t('Nodes')} head={[t('Node'), t('Hand-over')]}>
                  {m.nodes.map((n) => (
                    <tr className="pf-v6-c-table__tr" key={n.name} data-node={n.name} data-state={n.state}>
                      <Cell label={t('Node')}>{n.name}</Cell>
                      <Cell label={t('Hand-over')}>{n.state}</Cell>
                    </tr>
                  ))}
                </Table>
              )}
              {m.run && <RunPanel run={m.run} onStop={() => take('stop')} />}
              {m.planText && (
                <>
                  <Title headingLevel="h2">{t('The plan')}</Title>
                  <pre data-test="plan-report">{m.planText}</pre>
                </>
              )}
            </>
          );
        }}
      </Loading>
    </PageSection>
  );
};

const RunPanel: React.FC<{ run: Run; onStop: () => void }> = ({ run, onStop }) => {
  const { t } = useLVMSTranslation();
  const latest = run.latest;
  return (
    <div data-test="run" data-action={run.action} data-state={run.state}>
      <Title headingLevel="h2">{t('{{action}}: {{state}}', { action: run.action, state: run.state })}</Title>
      {latest && latest.total > 0 && (
        <Progress data-test="run-progress" value={(100 * latest.done) / latest.total} title={`${latest.step} ${latest.done}/${latest.total}`} />
      )}
      {latest && <p>{latest.message}</p>}
      {run.state === 'running' && (
        <Button variant="link" data-test="stop-button" onClick={onStop}>
          {t('Stop')}
        </Button>
      )}
      {run.error && (
        <Alert variant="danger" isInline title={run.error} data-test="run-error" />
      )}
      {run.checks && (
        <Table label={t('Checks')} head={[t('Check'), t('Verdict'), t('Reason'), t('Fix')]}>
          {run.checks.map((c) => (
            <tr className="pf-v6-c-table__tr" key={c.name} data-check={c.name} data-verdict={c.verdict}>
              <Cell label={t('Check')}>{c.name}</Cell>
              <Cell label={t('Verdict')}>{c.verdict}</Cell>
              <Cell label={t('Reason')}>{c.reason}</Cell>
              <Cell label={t('Fix')}>{c.fix}</Cell>
            </tr>
          ))}
        </Table>
      )}
      {run.verify && (
        <div data-test="verify-result" data-differences={run.verify.differences.length}>
          {run.verify.differences.length === 0
            ? t('No difference: the storage is as recorded before the migration.')
            : run.verify.differences.map((d) => <p key={d}>{d}</p>)}
        </div>
      )}
    </div>
  );
};

export default MigrationPage;
