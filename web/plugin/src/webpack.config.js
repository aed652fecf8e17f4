// The console plugin's production build: TypeScript through ts-loader, modules the console shares (react,
// react-router, react-i18next, the SDK) left to the console by ConsoleRemotePlugin, PatternFly bundled.
// Module and chunk ids are deterministic, so the same sources give the same files (dist/ is committed).
const path = require('path');
const { ConsoleRemotePlugin } = require('@openshift-console/dynamic-plugin-sdk-webpack');

module.exports = {
  mode: 'production',
  context: __dirname,
  entry: {},
  output: {
    path: path.resolve(__dirname, '..', 'dist'),
    filename: '[name]-bundle-[contenthash].min.js',
    chunkFilename: '[name]-chunk-[contenthash].min.js',
    clean: { keep: /locales\// },
    hashFunction: 'xxhash64',
  },
  resolve: { extensions: ['.ts', '.tsx', '.js', '.jsx'] },
  module: {
    rules: [
      { test: /\.tsx?$/, exclude: /node_modules/, use: 'ts-loader' },
      // PatternFly's CSS is the console's: ConsoleRemotePlugin aliases it away; other CSS is not used.
    ],
  },
  plugins: [new ConsoleRemotePlugin()],
  devtool: false,
  optimization: { moduleIds: 'deterministic', chunkIds: 'deterministic', minimize: true },
  performance: { hints: false },
};
