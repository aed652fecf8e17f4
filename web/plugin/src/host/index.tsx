// A minimal console host for tests, built on @openshift/dynamic-plugin-sdk: it loads the LVMS plugin from
// its manifest the way the OpenShift console does (webpack module federation, the entry calling
// __load_plugin_entry__), provides the modules the console shares with plugins, and renders the plugin's
// routes and its details tab. Its consoleFetchJSON adds the test user's token, as the console's proxy does.
import * as React from 'react';
import * as ReactDOM from 'react-dom/client';
import * as ReactRouter from 'react-router';
import * as ReactI18next from 'react-i18next';
import i18next from 'i18next';
import * as PluginSDK from '@openshift/dynamic-plugin-sdk';
import { CodeRef, PluginStore, PluginStoreProvider, useResolvedExtensions, Extension } from '@openshift/dynamic-plugin-sdk';

const PLUGIN = 'lvms-console';
const BASE = `/api/plugins/${PLUGIN}/`;
const token = new URLSearchParams(window.location.search).get('token') ?? sessionStorage.getItem('token') ?? '';
sessionStorage.setItem('token', token);

// The console SDK's fetch, as far as the plugin uses it: JSON, the caller's token, errors with a status.
const request = async (url: string, init: RequestInit = {}) => {
  const resp = await fetch(url, { ...init, headers: { Authorization: `Bearer ${token}`, Accept: 'application/json', ...(init.headers ?? {}) } });
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err: any = new Error(body?.error?.message ?? resp.statusText);
    err.response = resp;
    err.status = resp.status;
    throw err;
  }
  return body;
};
const consoleFetchJSON = (url: string) => request(url);
// consoleFetchJSON.post, as the console's: a JSON body and the plugin's extra headers.
(consoleFetchJSON as any).post = (url: string, json: unknown, options: { headers?: Record<string, string> } = {}) =>
  request(url, { method: 'POST', body: JSON.stringify(json), headers: { 'Content-Type': 'application/json', ...(options.headers ?? {}) } });
const consoleSDK = { consoleFetchJSON };

const provide = (version: string, module: unknown) => ({
  [version]: { get: () => Promise.resolve(() => module), loaded: 1, from: 'lvms-test-host', eager: true },
});
const sharedScope = {
  react: provide(React.version, React),
  'react-router': provide('7.13.1', ReactRouter),
  'react-i18next': provide('16.5.8', ReactI18next),
  '@openshift/dynamic-plugin-sdk': provide('8.2.0', PluginSDK),
  '@openshift-console/dynamic-plugin-sdk': provide('4.22.0', consoleSDK),
};

type Route = Extension<'console.page/route', { path: string; component: CodeRef<React.ComponentType> }>;
type Tab = Extension<'console.tab/horizontalNav', { model: { kind: string }; component: CodeRef<React.ComponentType<{ obj: unknown }>> }>;
const isRoute = (e: Extension): e is Route => e.type === 'console.page/route';
const isTab = (e: Extension): e is Tab => e.type === 'console.tab/horizontalNav';

const Routes: React.FC = () => {
  const [routes, routesResolved] = useResolvedExtensions<Route>(isRoute);
  const [tabs, tabsResolved] = useResolvedExtensions<Tab>(isTab);
  if (!routesResolved || !tabsResolved) {
    return <p id="host-loading">Loading the plugin</p>;
  }
  return (
    <ReactRouter.Routes>
      {routes.map((r) => (
        <ReactRouter.Route key={r.uid} path={r.properties.path} element={<r.properties.component />} />
      ))}
      {tabs.map((tab) => (
        <ReactRouter.Route key={tab.uid} path={`/k8s/ns/:ns/${tab.properties.model.kind}/:name/lvms`} element={<TabPage tab={tab} />} />
      ))}
    </ReactRouter.Routes>
  );
};

const TabPage: React.FC<{ tab: { properties: { model: { kind: string }; component: React.ComponentType<{ obj: unknown }> } } }> = ({ tab }) => {
  const { ns, name } = ReactRouter.useParams();
  const Component = tab.properties.component;
  return <Component obj={{ kind: tab.properties.model.kind, metadata: { name, namespace: ns } }} />;
};

const main = async () => {
  const resources = await fetch(`${BASE}locales/en/plugin__${PLUGIN}.json`).then((r) => r.json());
  await i18next.use(ReactI18next.initReactI18next).init({
    lng: 'en', fallbackLng: 'en', resources: { en: { [`plugin__${PLUGIN}`]: resources } }, interpolation: { escapeValue: false },
  });
  const store = new PluginStore({ loaderOptions: { sharedScope, customDependencyResolutions: { '@console/pluginAPI': '4.22.0' } } });
  await store.loadPlugin(`${BASE}plugin-manifest.json`);
  ReactDOM.createRoot(document.getElementById('root')!).render(
    <PluginStoreProvider store={store}>
      <ReactRouter.BrowserRouter>
        <Routes />
      </ReactRouter.BrowserRouter>
    </PluginStoreProvider>,
  );
};

main().catch((err) => {
  document.getElementById('root')!.textContent = `host error: ${err?.message ?? err}`;
});
