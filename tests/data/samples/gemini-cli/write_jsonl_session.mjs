// Drives gemini-cli-core's real ChatRecordingService through the calls GeminiChat makes during a session
// (user prompt, thoughts, usage, model reply with tool calls, tool results, the tool response sent back,
// a rewind, a summary), so the file on disk is what that version of gemini-cli writes.
import { ChatRecordingService } from '@google/gemini-cli-core/dist/src/services/chatRecordingService.js';
const out = process.argv[2];
const tools = { read_file: { displayName: 'ReadFile', description: 'Reads a file', isOutputMarkdown: true },
  run_shell_command: { displayName: 'Shell', description: 'Runs a shell command', isOutputMarkdown: false } };
const context = {
  promptId: 'a3f1c2d4-5b6e-4f70-8a91-b2c3d4e5f607',
  config: { getProjectRoot: () => '/home/dev/demo', storage: { getProjectTempDir: () => out } },
  toolRegistry: { getTool: (name) => tools[name] },
};
const svc = new ChatRecordingService(context);
await svc.initialize(undefined, 'main');
const model = 'gemini-2.5-pro';
const usage = (p, c, cached, t) => ({ promptTokenCount: p, candidatesTokenCount: c, cachedContentTokenCount: cached,
  thoughtsTokenCount: t, toolUsePromptTokenCount: 0, totalTokenCount: p + c + t });
const tick = () => new Promise((r) => setTimeout(r, 15));
// Turn 1: a prompt, a model reply that calls two tools, their results sent back, a final answer.
svc.recordMessage({ model, type: 'user', content: [{ text: 'What does src/main.ts print? Run it too.' }] });
await tick();
svc.recordThought({ subject: 'Reading the entry point', description: 'I will read the file, then run it.' });
svc.recordMessage({ model, type: 'gemini', content: 'I will read the file and run it.' });
svc.recordMessageTokens(usage(5120, 61, 4096, 37));
await tick();
const call = (id, name, args, output, status = 'success') => ({ id, name, args, status,
  result: [{ functionResponse: { id, name, response: status === 'success' ? { output } : { error: output } } }],
  timestamp: new Date().toISOString(), resultDisplay: output });
svc.recordToolCalls(model, [call('read_file-1', 'read_file', { file_path: 'src/main.ts' }, 'console.log("hi")\n'),
  call('run_shell_command-2', 'run_shell_command', { command: 'node src/main.ts' }, 'Error: Cannot find module', 'error')]);
svc.recordSyntheticMessage('user', [
  { functionResponse: { id: 'read_file-1', name: 'read_file', response: { output: 'console.log("hi")\n' } } },
  { functionResponse: { id: 'run_shell_command-2', name: 'run_shell_command', response: { error: 'Error: Cannot find module' } } }]);
await tick();
svc.recordMessage({ model, type: 'gemini', content: 'It prints `hi`; running it failed because node cannot load .ts files.' });
svc.recordMessageTokens(usage(5290, 23, 5120, 12));
await tick();
// Turn 2: a prompt the user then rewinds, and the prompt that replaced it.
const wrong = svc.recordMessage({ model, type: 'user', content: [{ text: 'Delete the file.' }] });
await tick();
svc.recordMessage({ model, type: 'gemini', content: 'Deleting src/main.ts.' });
svc.recordMessageTokens(usage(5330, 9, 5120, 0));
svc.recordMessage({ model: undefined, type: 'info', content: 'Rewinding to before "Delete the file."' });
svc.rewindTo(wrong);
await tick();
svc.recordMessage({ model, type: 'user', content: [{ text: 'Rename it to main.js instead.' }] });
await tick();
svc.recordMessage({ model, type: 'gemini', content: '' });
svc.recordToolCalls(model, [call('run_shell_command-3', 'run_shell_command', { command: 'mv src/main.ts src/main.js' }, '')]);
svc.recordMessageTokens(usage(5402, 18, 5120, 0));
svc.recordSyntheticMessage('user', [
  { functionResponse: { id: 'run_shell_command-3', name: 'run_shell_command', response: { output: '' } } }]);
await tick();
svc.recordMessage({ model, type: 'gemini', content: 'Renamed src/main.ts to src/main.js.' });
svc.recordMessageTokens(usage(5431, 11, 5376, 0));
svc.saveSummary('Read, ran and renamed src/main.ts');
console.log(svc.getConversationFilePath?.() ?? 'done');
