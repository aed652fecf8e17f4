import * as React from 'react';
import { useTranslation } from 'react-i18next';
import { Alert, Label, Spinner } from '@patternfly/react-core';
import { Explanation, Health, LoadError } from './api';

export const NS = 'plugin__lvms-console';

export const useLVMSTranslation = () => useTranslation(NS);

const colors: Record<Health, 'green' | 'blue' | 'orange' | 'red' | 'grey'> = {
  ok: 'green', info: 'blue', warning: 'orange', error: 'red', unknown: 'grey',
};

export const HealthLabel: React.FC<{ health: Health; text: string }> = ({ health, text }) => (
  <Label color={colors[health] ?? 'grey'} data-health={health}>
    {text}
  </Label>
);

// Loading shows a spinner, a refusal or an error; children render once data is there.
export const Loading: React.FC<{ loading: boolean; error?: LoadError; what: string; children: () => React.ReactNode }> = ({
  loading, error, what, children,
}) => {
  const { t } = useLVMSTranslation();
  if (loading) {
    return <Spinner aria-label={t('Loading')} />;
  }
  if (error?.status === 403) {
    return (
      <Alert variant="danger" isInline title={t('Forbidden')} data-test="forbidden">
        {t('You may not read {{what}}. Ask an administrator for the lvms-console-viewer role.', { what })}
      </Alert>
    );
  }
  if (error) {
    return (
      <Alert variant="danger" isInline title={t('Could not load {{what}}', { what })} data-test="error">
        {error.message}
      </Alert>
    );
  }
  return <>{children()}</>;
};

export const Explained: React.FC<{ explanation?: Explanation }> = ({ explanation }) =>
  explanation ? (
    <div className="lvms-explanation">
      <strong>{explanation.title}</strong>
      {explanation.why && <p>{explanation.why}</p>}
      {explanation.next && explanation.next.length > 0 && (
        <ul>
          {explanation.next.map((s, i) => (
            <li key={i}>
              {s.text}
              {s.command && <pre>{s.command}</pre>}
            </li>
          ))}
        </ul>
      )}
      {explanation.warning && <Alert variant="warning" isInline isPlain title={explanation.warning} />}
    </div>
  ) : null;

export const Table: React.FC<{ label: string; head: string[]; children: React.ReactNode }> = ({ label, head, children }) => (
  <table className="pf-v6-c-table pf-m-compact" aria-label={label}>
    <thead className="pf-v6-c-table__thead">
      <tr className="pf-v6-c-table__tr">
        {head.map((h) => (
          <th className="pf-v6-c-table__th" key={h} scope="col">
            {h}
          </th>
        ))}
      </tr>
    </thead>
    <tbody className="pf-v6-c-table__tbody">{children}</tbody>
  </table>
);

export const Cell: React.FC<{ label: string; children: React.ReactNode }> = ({ label, children }) => (
  <td className="pf-v6-c-table__td" data-label={label}>
    {children}
  </td>
);
