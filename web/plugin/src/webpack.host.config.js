// The test host page (host/index.tsx): one deterministic bundle in ../hosttest/dist, committed beside the
// Go test that serves it.
const path = require('path');

module.exports = {
  mode: 'production',
  context: __dirname,
  entry: { host: './host/index.tsx' },
  output: { path: path.resolve(__dirname, '..', 'hosttest', 'dist'), filename: '[name].js', clean: true, hashFunction: 'xxhash64' },
  resolve: { extensions: ['.ts', '.tsx', '.js', '.jsx'] },
  module: {
    rules: [{ test: /\.tsx?$/, exclude: /node_modules/, use: 'ts-loader' }],
  },
  devtool: false,
  optimization: { moduleIds: 'deterministic', chunkIds: 'deterministic', minimize: true },
  performance: { hints: false },
};
