// Drives gemini-cli-core 0.20.0's real ChatRecordingService (the version that wrote one JSON document per
// session) through the calls GeminiChat made: prompt, thoughts, usage, a reply calling tools, results.
import { ChatRecordingService } from '@google/gemini-cli-core/dist/src/services/chatRecordingService.js';
const out = process.argv[2];
const tools = { list_directory: { displayName: 'ReadFolder', description: 'Lists a directory', isOutputMarkdown: true },
  write_file: { displayName: 'WriteFile', description: 'Writes a file', isOutputMarkdown: true } };
const config = {
  getSessionId: () => '7c1e9a40-2b3d-4e5f-9a61-0b2c3d4e5f60',
  getProjectRoot: () => '/home/dev/demo',
  storage: { getProjectTempDir: () => out },
  getToolRegistry: () => ({ getTool: (name) => tools[name] }),
};
const svc = new ChatRecordingService(config);
svc.initialize();
const model = 'gemini-2.5-flash';
const usage = (p, c, cached, t) => ({ promptTokenCount: p, candidatesTokenCount: c, cachedContentTokenCount: cached,
  thoughtsTokenCount: t, toolUsePromptTokenCount: 0, totalTokenCount: p + c + t });
const tick = () => new Promise((r) => setTimeout(r, 15));
const call = (id, name, args, output, status = 'success') => ({ id, name, args, status,
  result: [{ functionResponse: { id, name, response: status === 'success' ? { output } : { error: output } } }],
  timestamp: new Date().toISOString(), resultDisplay: output });
svc.recordMessage({ model, type: 'user', content: 'List the files here and add a README.' });
await tick();
svc.recordThought({ subject: 'Listing first', description: 'I need to see what exists before writing.' });
svc.recordMessageTokens(usage(4210, 40, 0, 25));
svc.recordMessage({ model, type: 'gemini', content: 'Let me list the directory.' });
svc.recordToolCalls(model, [call('list_directory-1763000000000-1a2b', 'list_directory', { path: '.' }, 'src/\npackage.json')]);
await tick();
svc.recordMessageTokens(usage(4302, 52, 4096, 0));
svc.recordMessage({ model, type: 'gemini', content: 'I will write the README.' });
svc.recordToolCalls(model, [call('write_file-1763000000100-3c4d', 'write_file', { file_path: 'README.md', content: '# demo\n' },
  'User rejected the write', 'cancelled')]);
await tick();
svc.recordMessage({ model, type: 'user', content: 'Never mind, stop here.' });
await tick();
svc.recordMessageTokens(usage(4420, 8, 4096, 0));
svc.recordMessage({ model, type: 'gemini', content: 'Stopped. The directory holds src/ and package.json.' });
console.log('done');
